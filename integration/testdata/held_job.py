# A job that holds its SparkContext (UI, event log, Python workers) open
# until the file named by argv[2] appears, bounded: the token test looks at
# every process and the UI while it runs. The master comes from here, not
# from spark-submit's command line (as with spark-defaults.conf).
import os
import sys
import time

from pyspark.sql import SparkSession

ready, release = sys.argv[1], sys.argv[2]
spark = SparkSession.builder.master("local[2]").appName("held").getOrCreate()
sc = spark.sparkContext
total = sc.parallelize(range(100), 2).map(lambda x: x * 2).sum()
with open(ready + ".tmp", "w") as f:
    f.write("%s %d\n" % (sc.applicationId, total))
os.rename(ready + ".tmp", ready)
deadline = time.monotonic() + 120
while not os.path.exists(release) and time.monotonic() < deadline:
    time.sleep(0.1)
spark.stop()
