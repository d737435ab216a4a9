"""A job with one bad value, met by four kinds of executor code in turn: a
Python UDF, an RDD lambda, a mapInPandas function and a pandas UDF, each
defined in this driver script. Each action fails on partition 1 (the bad
value is there); the job goes on to the next and reports what failed.

TestCaptureReplayOnSpark captures each failing call at its post-mortem
stop, then fixes the developer's copy of this file line by line: each
marked line has a fixed version in the test."""
import sys

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql.functions import pandas_udf, udf

# pandas_udf needs the session.
spark = SparkSession.builder.appName("sparkdap-capture").config("spark.sql.shuffle.partitions", "2").getOrCreate()


def parse_amount(s):
    return int(s) * 2  # BREAKPOINT: udf


def to_cents(batches):
    for pdf in batches:
        yield pdf.assign(cents=pdf["s"].astype(int) * 100)  # BREAKPOINT: mapinpandas


@pandas_udf("long")
def tripled(s: pd.Series) -> pd.Series:
    return s.astype(int) * 3  # BREAKPOINT: pandas-udf


# range(4) in 2 partitions: 0, 1 in partition 0; 2, 3 in partition 1,
# where 3 becomes the bad value "x".
df = spark.range(0, 4, numPartitions=2).selectExpr("CASE WHEN id = 3 THEN 'x' ELSE CAST(id AS STRING) END AS s")


def report(line):
    # One write per line: PySpark runs the driver with PYTHONUNBUFFERED, so
    # print("CASE", name, ...) writes each word on its own, and the JVM's log
    # lines on the same pipe can land between them.
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def attempt(name, action):
    try:
        report(f"CASE {name} OK {action()}")
    except Exception as exc:  # each case fails, as the job would without sparkdap
        report(f"CASE {name} FAILED {type(exc).__name__}")


attempt("udf", df.select(udf(parse_amount, "long")("s")).collect)
# [4, 2] in partition 0, [1, 0] in partition 1.
inverse = spark.sparkContext.parallelize([4, 2, 1, 0], 2).map(lambda x: 100 // x)  # BREAKPOINT: lambda
attempt("lambda", inverse.collect)
attempt("mapinpandas", df.mapInPandas(to_cents, "s string, cents long").collect)
attempt("pandas-udf", df.select(tripled("s")).collect)
spark.stop()
sys.exit(0)
