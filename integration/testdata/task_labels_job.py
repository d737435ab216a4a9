"""Two stages, for what an IDE shows of the task a stopped worker runs.

    task_labels_job.py OUT PARTITIONS STOPPING [GATHER]

The first stage has PARTITIONS one-element partitions; those numbered
below STOPPING run through the "first" breakpoint line, then the
"before-blank" line, which a blank line follows. A shuffle follows; the
second stage's partition 0 runs through the "second" line. OUT gets the
job's result. With GATHER, a directory, every first-stage task waits
there (a minute at most) until all have started, so that each runs in a
Python worker of its own.
"""

import json
import os
import sys
import time
from operator import add

from pyspark import TaskContext
from pyspark.sql import SparkSession

PARTITIONS = int(sys.argv[2])
STOPPING = int(sys.argv[3])
GATHER = sys.argv[4] if len(sys.argv) > 4 else None


def gather(partition):
    if GATHER is None:
        return
    open(os.path.join(GATHER, str(partition)), "w").close()
    deadline = time.monotonic() + 60
    while len(os.listdir(GATHER)) < PARTITIONS and time.monotonic() < deadline:
        time.sleep(0.05)


def first(x):
    partition = TaskContext.get().partitionId()
    gather(partition)
    if partition < STOPPING:
        held = partition  # BREAKPOINT: first
        x += held - partition  # BREAKPOINT: before-blank

    return (x % 2, x)


def second(kv):
    key, total = kv
    if TaskContext.get().partitionId() == 0:
        total += 0  # BREAKPOINT: second
    return key, total


spark = SparkSession.builder.appName("sparkdap-task-labels").getOrCreate()
sums = (
    spark.sparkContext.parallelize(range(PARTITIONS), PARTITIONS)
    .map(first)
    .reduceByKey(add, 2)
    .map(second)
    .collect()
)
with open(sys.argv[1], "w") as f:
    json.dump({"sums": dict(sums)}, f)
spark.stop()
