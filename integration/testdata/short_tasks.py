"""Many short tasks: ACTIONS actions of PARTS one-row partitions, the job the
unselected-task benchmark times.

usage: short_tasks.py OUT_JSON ACTIONS PARTS
The driver times the actions alone (JVM and session start-up excluded) and
writes {"action_s": …, "total": …} to OUT_JSON.
"""
import json
import sys
import time

from pyspark.sql import SparkSession


def inc(x):
    return x + 1


out, actions, parts = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
spark = SparkSession.builder.appName("sparkdap-short-tasks").getOrCreate()
sc = spark.sparkContext
t0 = time.perf_counter()
total = 0
for _ in range(actions):
    total += sc.parallelize(range(parts), parts).map(inc).sum()
action_s = time.perf_counter() - t0
with open(out, "w") as f:
    json.dump({"action_s": action_s, "total": total}, f)
spark.stop()
