"""The worker module's parsers against testdata/settings_cases.json, the
table the Go parsers are tested against too (options_cases_test.go)."""

import json
import math
import os

import pytest

TABLE = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), "..", "..", "testdata", "settings_cases.json"
)

with open(TABLE, encoding="utf-8") as f:
    CASES = json.load(f)["cases"]

# setting -> (parser name in remote_debug, the variable that carries it, the config key)
PARSERS = {
    "ids": ("_parse_ids", "SPARKDAP_PARTITIONS", "partitions"),
    "proxy": ("_parse_proxy", "SPARKDAP_PROXY", "proxy"),
    "sample_rate": ("_parse_rate", "SPARKDAP_SAMPLE_RATE", "sample_rate"),
    "timeout": ("_parse_seconds", "SPARKDAP_CONNECT_TIMEOUT", "connect_timeout"),
    "bool": ("_parse_bool", "SPARKDAP_WAIT", "wait"),
    "lease": ("_parse_lease", "SPARKDAP_LEASE", "lease"),
    "proxy_backoff": ("_parse_backoff", "SPARKDAP_PROXY_BACKOFF", "proxy_backoff"),
}


def expected(case):
    side = case.get("python") or case
    return side.get("want"), bool(side.get("error"))


def same(got, want):
    if isinstance(got, tuple):
        got = list(got)
    if isinstance(want, float) and not isinstance(got, bool):
        return isinstance(got, (int, float)) and math.isclose(got, want, rel_tol=1e-9)
    if isinstance(want, list):
        return (
            isinstance(got, list)
            and len(got) == len(want)
            and all(same(g, w) for g, w in zip(got, want))
        )
    return type(got) is type(want) and got == want


def case_id(case):
    return "%s:%r" % (case["setting"], case["in"])


def test_table_is_read():
    assert len(CASES) > 20
    assert {c["setting"] for c in CASES} == set(PARSERS)
    for case in CASES:
        if "go" in case or "python" in case:
            assert case.get("why"), case_id(case)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_parser(rd, case):
    parse = getattr(rd, PARSERS[case["setting"]][0])
    want, error = expected(case)
    if error:
        with pytest.raises(ValueError):
            parse("X", case["in"])
    else:
        got = parse("X", case["in"])
        assert same(got, want), "%r parsed to %r, want %r" % (case["in"], got, want)


@pytest.mark.parametrize("case", CASES, ids=case_id)
def test_through_the_environment(rd, baked, monkeypatch, case):
    """The same, the way a worker reads it: an executor variable overriding
    the baked-in settings."""
    _, var, key = PARSERS[case["setting"]]
    want, error = expected(case)
    monkeypatch.setenv(var, case["in"])
    if error:
        with pytest.raises(ValueError, match="invalid " + var):
            rd._load_config()
    else:
        got = rd._load_config()[key]
        assert same(got, want), "%s=%r read as %r, want %r" % (var, case["in"], got, want)
