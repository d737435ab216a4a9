"""Every kind of value a PySpark function receives, met by executor code
that stops on it: an RDD lambda's element holding scalars, nested
containers, datetime and Decimal values, numpy arrays, a pandas DataFrame
with a non-default index and a Row; a Python UDF's struct argument (a
Row); and a mapInPandas batch. Each function raises with its verdict on
what it got, so --post-mortem stops there.

TestCaptureValuesOnSpark captures each stop and replays it without
--trust-captured-code: the replayed function, this file's own, compares
the decoded value with expected() again, so "verdict: same" in the
replay's output says the value came back equal."""
import datetime
import decimal
import sys
import uuid

import numpy as np
import pandas as pd
from pyspark.sql import Row, SparkSession
from pyspark.sql.functions import struct, udf

spark = SparkSession.builder.appName("sparkdap-capture-values").config("spark.sql.shuffle.partitions", "1").getOrCreate()


def expected():
    """One value of each kind, keyed by kind."""
    return {
        "scalars": [0, -(2**70), 1.5, float("nan"), float("inf"), "text ü", b"\x00\xff", True, None],
        "containers": {"list": [1, [2, (3, "x")]], "tuple": (1, (2,)), "set": {1, 2}, "frozenset": frozenset("ab"), 7: {"k": [None]}},
        "datetime": [
            datetime.datetime(2024, 2, 29, 12, 30, 1, 5),
            datetime.datetime(2024, 2, 29, 12, 30, tzinfo=datetime.timezone(datetime.timedelta(hours=2))),
            datetime.date(2024, 1, 1),
            datetime.time(23, 59, 59),
            datetime.timedelta(days=2, microseconds=7),
        ],
        "decimal": [decimal.Decimal("123.4500"), decimal.Decimal("-1E-20"), uuid.UUID(int=42)],
        "numpy": [np.arange(6, dtype=np.int32).reshape(2, 3), np.array([1.5, np.nan]), np.array(["2024-01-01"], dtype="datetime64[D]"), np.float32(2.5)],
        "pandas": pd.DataFrame({"x": [1, 2], "s": ["a", None], "f": [0.5, np.nan]}, index=pd.Index(["r1", "r2"], name="key")),
        "row": Row(id=3, name="n", nested=Row(a=1.0)),
    }


def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, pd.DataFrame):
        try:
            pd.testing.assert_frame_equal(a, b, check_exact=True)
            return True
        except AssertionError:
            return False
    if isinstance(a, (np.ndarray, np.generic)):
        return a.dtype == b.dtype and a.shape == b.shape and np.array_equal(a, b, equal_nan=a.dtype.kind == "f")
    if isinstance(a, float) and a != a:
        return b != b
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        fields = getattr(a, "__fields__", None), getattr(b, "__fields__", None)
        return len(a) == len(b) and fields[0] == fields[1] and all(same(x, y) for x, y in zip(a, b))
    return a == b


def verdict(got, want):
    differ = sorted(str(k) for k in want if not same(got.get(k), want[k]))
    return "same" if not differ and got.keys() == want.keys() else "differ in " + ", ".join(differ)


def check(value):
    raise ValueError("verdict: " + verdict(value, expected()))  # STOP: rdd


def check_row(r):
    raise ValueError("verdict: " + verdict({"row": r}, {"row": Row(id=0, name="a")}))  # STOP: udf


def expected_batch():
    return pd.DataFrame({"id": [0, 1], "s": ["a", None], "d": [1.5, None]})


def check_batch(batches):
    for pdf in batches:
        ok = same(pdf, expected_batch())
        raise ValueError("verdict: " + ("same" if ok else "differ in batch"))  # STOP: mapinpandas
        yield pdf


def report(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def attempt(name, action):
    try:
        report(f"CASE {name} OK {action()}")
    except Exception as exc:  # each case fails: the post-mortem stop is the point
        report(f"CASE {name} FAILED {type(exc).__name__}")


attempt("rdd", spark.sparkContext.parallelize([expected()], 1).map(check).collect)
df = spark.createDataFrame([(0, "a", 1.5), (1, None, None)], "id long, s string, d double").coalesce(1)
attempt("udf", df.where("id = 0").select(udf(check_row, "string")(struct(df.id.alias("id"), df.s.alias("name")))).collect)
attempt("mapinpandas", df.mapInPandas(check_batch, df.schema).collect)
spark.stop()
sys.exit(0)
