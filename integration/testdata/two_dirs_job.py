"""Closures from two directories in one worker process, as on a Spark
Connect server whose clients run from different folders: the first job's
lambda comes from this script, the second job's function from another
file (compiled under its own path, as a second client's would be). Both
files are gone before any task runs. Run with local[1]: one Python worker
runs every task, so the second job's task reuses the debugged worker."""
import json
import os
import sys

from pyspark.sql import SparkSession

os.remove(os.path.abspath(__file__))
other = sys.argv[2]
with open(other) as f:
    source = f.read()
os.remove(other)
client = {"__name__": "__main__"}  # pickled by value, like a client's function
exec(compile(source, other, "exec"), client)

spark = SparkSession.builder.appName("sparkdap-two-dirs").getOrCreate()
sc = spark.sparkContext
first = sc.parallelize(range(100), 4).map(lambda x: x * 2).sum()
second = sc.parallelize(range(100), 4).map(client["scale"]).sum()
with open(sys.argv[1], "w") as f:
    json.dump({"first": first, "second": second}, f)
spark.stop()
