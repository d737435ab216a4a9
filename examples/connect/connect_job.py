"""A Spark Connect client: python3 connect_job.py sc://127.0.0.1:15002 out.json

Its UDF is pickled here and runs in the Connect server's Python workers,
which know nothing of this client's settings. examples/README.md's Spark
Connect recipe debugs it; integration/connect_test.go runs that recipe."""
import json
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf


def main():
    remote, out = sys.argv[1], sys.argv[2]
    spark = SparkSession.builder.remote(remote).getOrCreate()

    @udf("long")
    def score(x):
        bonus = x * 3 + 1  # BREAKPOINT: connect-udf
        return bonus

    # Four partitions of ten ids each: partition 0 holds 0..9.
    df = spark.range(0, 40, numPartitions=4).withColumn("s", score(col("id")))
    rows = sorted((r["id"], r["s"]) for r in df.collect())
    with open(out, "w") as f:
        json.dump({"rows": rows, "total": sum(s for _, s in rows)}, f)
    spark.stop()


if __name__ == "__main__":
    main()
