"""A driver run the way notebooks and schedulers run one: plain
spark-submit with the options `sparkdap conf` prints, no SPARKDAP_DRIVER_DIR.
Its script is gone by the time executors run its closures, as on a cluster,
and the workers do not run in its directory. The lambda and the UDF below
are pickled by value with this file's path as co_filename."""
import json
import os
import sys

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, udf

# Executors in local mode share the driver's filesystem; removing the script
# is what makes its path as absent for them as on a cluster.
os.remove(os.path.abspath(__file__))

spark = SparkSession.builder.appName("sparkdap-driver-closures").getOrCreate()
factor = 3
total = (
    spark.sparkContext.parallelize(range(100), 4)
    .map(lambda x: x * factor + 1)  # BREAKPOINT: driver-lambda
    .sum()
)


@udf("long")
def plus_seven(n):
    return n + 7  # BREAKPOINT: driver-udf


udf_total = (
    spark.range(0, 100, 1, 4).select(plus_seven(col("id")).alias("v")).groupBy().sum("v").collect()[0][0]
)
with open(sys.argv[1], "w") as f:
    json.dump({"total": total, "udf_total": udf_total}, f)
spark.stop()
