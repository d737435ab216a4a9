"""A task that prints a lot at its end, for integration/output_test.go.

Every line is LINE_WIDTH bytes with its newline, "sparkdap-line <seq> xxx…",
seq counting from 0, so the test can tell which lines reached the IDE.

  big_output.py job OUT LINES
      A local Spark job: partition 0 of two prints LINES lines, then the
      job writes {"count": …, "loop": [start, end, cpu]} to OUT and ends at
      once (spark.stop, exit); loop is when partition 0's print loop began
      and ended, flush included (epoch seconds, the task's clock), and the
      CPU seconds its process (all its threads) used meanwhile.
  big_output.py worker --wrapper DIR --lines LINES
      A Spark worker minus Spark: the generated wrapper in DIR attaches this
      process as a selected task, then one task, run through the wrapper's
      own end-of-task hook, prints LINES lines. Marks on stderr (fd 2,
      around sys.stderr): CONNECTED <state>, PRINTED <n> once the task
      function has returned, TASK-ENDED once the wrapper's end of task has.
"""

import os
import sys
import time

LINE_WIDTH = 80


def spew(lines):
    head = "sparkdap-line %07d "
    pad = "x" * (LINE_WIDTH - len(head % 0) - 1)
    for i in range(lines):
        print(head % i + pad)


def mark(text):
    os.write(2, ("%s %.3f\n" % (text, time.time())).encode())


def job(out, lines):
    import json

    from pyspark.sql import SparkSession

    def part(index, it):
        n = sum(1 for _ in it)
        loop = None
        if index == 0:
            start, t0 = time.time(), os.times()
            spew(lines)
            sys.stdout.flush()
            t1 = os.times()
            loop = [start, time.time(), t1.user - t0.user + t1.system - t0.system]
        yield n, loop

    spark = SparkSession.builder.appName("sparkdap-big-output").getOrCreate()
    parts = spark.sparkContext.parallelize(range(8), 2).mapPartitionsWithIndex(part).collect()
    count = sum(n for n, _ in parts)
    loop = next(lp for _, lp in parts if lp is not None)
    with open(out, "w") as f:
        json.dump({"count": count, "loop": loop}, f)
    spark.stop()


def worker(wrapper, lines):
    sys.path.insert(0, wrapper)
    import remote_debug

    cfg = remote_debug._config()
    task = {"stageId": 1, "partitionId": 0, "attemptNumber": 0, "taskAttemptId": 1}
    remote_debug._connect(cfg, task)
    mark("CONNECTED %s" % (remote_debug._st().debugger,))

    def main():
        spew(lines)
        sys.stdout.flush()
        mark("PRINTED %d" % lines)

    # The end of task as Spark's worker.main meets it under the wrapper.
    remote_debug._wrap_main(main)()
    mark("TASK-ENDED")


if __name__ == "__main__":
    if sys.argv[1] == "job":
        job(sys.argv[2], int(sys.argv[3]))
    else:
        import argparse

        ap = argparse.ArgumentParser()
        ap.add_argument("mode")
        ap.add_argument("--wrapper", required=True)
        ap.add_argument("--lines", type=int, required=True)
        args = ap.parse_args()
        worker(args.wrapper, args.lines)
