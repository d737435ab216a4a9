"""A job that says when its first task began, for the first-stop benchmarks.

  firststop_job.py PARTITIONS [OUT]

Each task's first line reads the clock; that line is where a debugged run
puts its breakpoint, so "first stop" and "first task" name the same moment
of the same task. The driver prints

  SPARKDAP-FIRST-TASK <epoch seconds of the earliest task start> <count>

on stdout and, with OUT, writes {"first_task": …, "count": …} there. Every
process runs on the same machine (local, the one-node YARN, the one-node
Kubernetes), so the benchmark compares these epochs with its own clock.
"""

import json
import sys
import time


def task(it):
    started = time.time()  # first-stop: the breakpoint's line
    n = sum(1 for _ in it)
    yield (started, n)


def main(partitions, out=None):
    from pyspark.sql import SparkSession

    spark = SparkSession.builder.appName("sparkdap-first-stop").getOrCreate()
    rdd = spark.sparkContext.parallelize(range(partitions * 10), partitions)
    got = rdd.mapPartitions(task).collect()
    first = min(s for s, _ in got)
    count = sum(n for _, n in got)
    # One write of the whole line: the driver's log shares the pipe, and
    # print() writes the newline apart, which let a log line in before it.
    sys.stdout.write("SPARKDAP-FIRST-TASK %.6f %d\n" % (first, count))
    sys.stdout.flush()
    if out:
        with open(out, "w") as f:
            json.dump({"first_task": first, "count": count}, f)
    spark.stop()


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2] if len(sys.argv) > 2 else None)
