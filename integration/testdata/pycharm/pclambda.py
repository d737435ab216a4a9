"""PySpark job for integration/pycharm_test.go: the same result as pcjob.py,
with the executor code a lambda inside the driver's main(): PyCharm names
main as the breakpoint's function, the executor's frame is <lambda>."""
import json
import sys

from pyspark.sql import SparkSession


def main(out):
    spark = SparkSession.builder.appName("sparkdap-pycharm-lambda").getOrCreate()
    values = spark.sparkContext.parallelize(range(40), 2).map(
        lambda x: x * 2  # BREAKPOINT: pclambda
    ).collect()
    with open(out, "w") as f:
        json.dump({"sum": sum(values), "count": len(values)}, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
