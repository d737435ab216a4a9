"""Two stages, for what an IDE shows of the task a stopped worker runs.

    task_labels_job.py OUT PARTITIONS STOPPING

The first stage has PARTITIONS one-element partitions; those numbered
below STOPPING run through the "first" breakpoint line, then the
"before-blank" line, which a blank line follows. A shuffle follows; the second stage's
partition 0 runs through the "second" line. OUT gets the job's result.
"""

import json
import sys
from operator import add

from pyspark import TaskContext
from pyspark.sql import SparkSession

STOPPING = int(sys.argv[3])


def first(x):
    partition = TaskContext.get().partitionId()
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
partitions = int(sys.argv[2])
sums = (
    spark.sparkContext.parallelize(range(partitions), partitions)
    .map(first)
    .reduceByKey(add, 2)
    .map(second)
    .collect()
)
with open(sys.argv[1], "w") as f:
    json.dump({"sums": dict(sums)}, f)
spark.stop()
