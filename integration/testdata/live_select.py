"""Two actions of 200 one-element partitions with a pause between them: a
test changes the selection while the job waits, then lets it go on."""
import json
import os
import sys
import time

from pyspark.sql import SparkSession


def inc(x):
    return x + 1  # BREAKPOINT: inc


out, go = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.appName("sparkdap-live-select").getOrCreate()
sc = spark.sparkContext
first = sc.parallelize(range(200), 200).map(inc).sum()
deadline = time.monotonic() + 300
while not os.path.exists(go) and time.monotonic() < deadline:
    time.sleep(0.05)
second = sc.parallelize(range(200), 200).map(inc).sum()
with open(out, "w") as f:
    json.dump({"first": first, "second": second}, f)
spark.stop()
