"""One stage of four partitions: the smallest job that shows task filtering."""
import json
import sys

from pyspark.sql import SparkSession


def square(x):
    return x * x  # BREAKPOINT: square


spark = SparkSession.builder.appName("sparkdap-four").getOrCreate()
total = spark.sparkContext.parallelize(range(40), 4).map(square).sum()
with open(sys.argv[1], "w") as f:
    json.dump({"total": total}, f)
spark.stop()
