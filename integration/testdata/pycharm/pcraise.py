"""PySpark job for integration/pycharm_exceptions_test.go: pcjob.py's result
(0..39 doubled) from pcmath.lookup, whose every call raises a KeyError it
catches, one element in each of forty partitions."""
import json
import sys

from pyspark.sql import SparkSession

import pcmath

if __name__ == "__main__":
    spark = SparkSession.builder.appName("sparkdap-pycharm-raise").getOrCreate()
    values = spark.sparkContext.parallelize(range(40), 40).map(pcmath.lookup).collect()
    with open(sys.argv[1], "w") as f:
        json.dump({"sum": sum(values), "count": len(values)}, f)
    spark.stop()
