"""A job whose UDF fails on one row, as real jobs do: the case --post-mortem
is for."""
import sys

from pyspark.sql import SparkSession


def checked_ratio(x):
    if x == 13:
        raise ValueError("bad row %d" % x)  # BREAKPOINT: raise
    return 100 // (x + 1)


spark = SparkSession.builder.appName("sparkdap-failing").getOrCreate()
try:
    spark.sparkContext.parallelize(range(40), 4).map(checked_ratio).sum()
except Exception as exc:  # the job fails, as it would without sparkdap
    # One write: the driver runs unbuffered (PySpark sets PYTHONUNBUFFERED),
    # and the JVM's log lines share the pipe.
    sys.stdout.write(f"JOB FAILED: {'bad row 13' in str(exc)}\n")
    sys.stdout.flush()
    sys.exit(3)
finally:
    spark.stop()
