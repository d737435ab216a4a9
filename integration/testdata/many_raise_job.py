"""Twenty tasks raise the same KeyError at the same line. caught: each
catches it and the job succeeds; fail: it escapes and fails the job."""
import json
import sys

from pyspark.sql import SparkSession

TABLE = {}


def lookup(x):
    try:
        return TABLE[x]  # BREAKPOINT: lookup
    except KeyError:
        return -1


def strict(x):
    return TABLE[x] + 1  # BREAKPOINT: strict


mode, out = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("sparkdap-many-raise").getOrCreate()
sc = spark.sparkContext
try:
    f = lookup if mode == "caught" else strict
    total = sc.parallelize(range(20), 20).map(f).sum()
    with open(out, "w") as fh:
        json.dump({"total": total}, fh)
except Exception as exc:  # the job fails, as it would without sparkdap
    sys.stdout.write("JOB FAILED: %s\n" % ("KeyError: 0" in str(exc) or "KeyError" in str(exc)))
    sys.stdout.flush()
    sys.exit(3)
finally:
    spark.stop()
