"""PySpark job for integration/pycharm_test.go: doubles 0..39 in two
partitions with pcmath.scale (shipped with --py-files, so executors import it
from Spark's own copy) and writes the result as JSON to argv[1]."""
import json
import sys

from pyspark.sql import SparkSession

import pcmath

if __name__ == "__main__":
    spark = SparkSession.builder.appName("sparkdap-pycharm-test").getOrCreate()
    values = spark.sparkContext.parallelize(range(40), 2).map(pcmath.scale).collect()
    with open(sys.argv[1], "w") as f:
        json.dump({"sum": sum(values), "count": len(values)}, f)
    spark.stop()
