"""CPU-bound PySpark job for the worker-overhead benchmark.

usage: cpujob.py OUT_JSON ROWS
8 partitions of a Python UDF that does pure-Python arithmetic per row. The
driver times the action alone (JVM and session start-up excluded) and
writes {"action_s": …, "checksum": …} to OUT_JSON.
"""
import json
import sys
import time

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, sum as fsum, udf
from pyspark.sql.types import LongType


@udf(returnType=LongType())
def churn(x):
    acc = x
    for i in range(2000):
        acc = (acc * 31 + i) % 1000003
    return acc


if __name__ == "__main__":
    out, rows = sys.argv[1], int(sys.argv[2])
    spark = SparkSession.builder.appName("sparkdap-bench-cpujob").getOrCreate()
    df = spark.range(0, rows, numPartitions=8)
    t0 = time.perf_counter()
    checksum = df.select(churn(col("id")).alias("v")).agg(fsum("v")).collect()[0][0]
    action = time.perf_counter() - t0
    with open(out, "w") as f:
        json.dump({"action_s": action, "checksum": checksum}, f)
    spark.stop()
