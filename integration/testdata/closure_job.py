"""A driver whose script is gone by the time executors run its closures,
as on a real cluster, where the driver's files do not exist on executors.
The lambda below is pickled by value with this file's path as co_filename."""
import json
import os
import sys

from pyspark.sql import SparkSession

# Executors in local mode share the driver's filesystem; removing the script
# is what makes its path as absent for them as on a cluster.
os.remove(os.path.abspath(__file__))

spark = SparkSession.builder.appName("sparkdap-closure").getOrCreate()
factor = 3
total = (
    spark.sparkContext.parallelize(range(100), 4)
    .map(lambda x: x * factor + 1)  # BREAKPOINT: closure-lambda
    .sum()
)
with open(sys.argv[1], "w") as f:
    json.dump({"total": total}, f)
spark.stop()
