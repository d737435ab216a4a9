"""Test job for workerwrap's Spark tests: doubles 0..39 in N partitions and
writes the result as JSON to argv[1]."""
import json
import sys

from pyspark.sql import SparkSession


def scale(x):
    return x * 2  # BREAKPOINT: job-scale


if __name__ == "__main__":
    out, partitions = sys.argv[1], int(sys.argv[2])
    spark = SparkSession.builder.appName("sparkdap-workerwrap-test").getOrCreate()
    values = spark.sparkContext.parallelize(range(40), partitions).map(scale).collect()
    with open(out, "w") as f:
        json.dump({"sum": sum(values), "count": len(values)}, f)
    spark.stop()
