"""PySpark job for integration/taskcond_ides_test.go: pcjob.py's job (doubles
0..39 with pcmath.scale, same result) in four partitions, so that partition
3 holds 30..39."""
import json
import sys

from pyspark.sql import SparkSession

import pcmath

if __name__ == "__main__":
    spark = SparkSession.builder.appName("sparkdap-pycharm-four").getOrCreate()
    values = spark.sparkContext.parallelize(range(40), 4).map(pcmath.scale).collect()
    with open(sys.argv[1], "w") as f:
        json.dump({"sum": sum(values), "count": len(values)}, f)
    spark.stop()
