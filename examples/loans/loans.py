"""Loan payment and interest report: a small PySpark job shaped like real
ones, to try sparkdap on. Run it as in README.md.

Good places for breakpoints carry a "# BREAKPOINT: <name>" comment; the
tests find their line numbers by that marker.
"""
import argparse
import json

import pandas as pd
from pyspark.sql import SparkSession
from pyspark.sql import functions as F
from pyspark.sql.functions import udf
from pyspark.sql.types import DoubleType

import loanlib


def make_loans(count):
    """Deterministic portfolio: no randomness, so every run prints the same."""
    loans = []
    for i in range(count):
        loans.append(
            {
                "id": "L%04d" % i,
                "principal": 10000.0 + 2500.0 * (i % 17),
                "annual_rate": 0.02 + 0.005 * (i % 13),
                "years": 5 + 5 * (i % 4),
            }
        )
    return loans


@udf(returnType=DoubleType())
def total_interest_udf(principal, annual_rate, years):
    interest = loanlib.total_interest(principal, annual_rate, years)  # BREAKPOINT: udf-body
    return round(interest, 2)


def first_year(batches):
    for pdf in batches:
        out = pd.DataFrame(  # BREAKPOINT: mapinpandas-body
            {
                "id": pdf["id"],
                "first_year_interest": [
                    round(loanlib.first_year_interest(p, r, y), 2)
                    for p, r, y in zip(pdf["principal"], pdf["annual_rate"], pdf["years"])
                ],
            }
        )
        yield out


def main():
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--loans", type=int, default=200)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--output", help="also write the result as JSON to this file")
    args = parser.parse_args()

    spark = SparkSession.builder.appName("sparkdap-loans").getOrCreate()
    sc = spark.sparkContext
    loans = make_loans(args.loans)

    # RDD API: lambdas defined here are pickled by value with this file's path.
    payments = (
        sc.parallelize(loans, args.partitions)
        .map(lambda loan: (loan["id"], loan))
        .mapValues(lambda loan: round(loanlib.monthly_payment(loan["principal"], loan["annual_rate"], loan["years"]), 2))  # BREAKPOINT: mapvalues-lambda
        .mapValues(lambda payment: payment * 12)
        .collectAsMap()
    )

    df = spark.createDataFrame(loans).repartition(args.partitions, "id")
    interest = df.select("id", total_interest_udf("principal", "annual_rate", "years").alias("total_interest"))
    first = df.mapInPandas(first_year, schema="id string, first_year_interest double")
    bands = (
        df.withColumn("band", F.udf(loanlib.risk_band)("annual_rate"))
        .groupBy("band")
        .agg(F.sum("principal").alias("principal"))
        .orderBy("band")
    )

    result = {
        "loans": len(loans),
        "annual_payments": round(sum(payments.values()), 2),
        "total_interest": round(sum(r.total_interest for r in interest.collect()), 2),
        "first_year_interest": round(sum(r.first_year_interest for r in first.collect()), 2),
        "principal_by_band": {r.band: r.principal for r in bands.collect()},
    }
    print(json.dumps(result, sort_keys=True))
    if args.output:
        with open(args.output, "w") as f:
            json.dump(result, f, sort_keys=True, indent=2)
    spark.stop()


if __name__ == "__main__":
    main()
