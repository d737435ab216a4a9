"""One stage of four partitions, a function called once per partition."""
import json
import sys

from pyspark.sql import SparkSession


def squares(items):
    items = list(items)  # BREAKPOINT: partition
    return [sum(x * x for x in items)]


spark = SparkSession.builder.appName("sparkdap-per-partition").getOrCreate()
total = spark.sparkContext.parallelize(range(40), 4).mapPartitions(squares).sum()
with open(sys.argv[1], "w") as f:
    json.dump({"total": total}, f)
spark.stop()
