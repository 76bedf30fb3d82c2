"""SLOs as vLLM users state them: the metric names, absolute and relative bounds, goodput in vLLM's
syntax, and which runs can judge which metric."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from slim import columns as col
from slim.errors import AdvisorError
from slim.specs.slo import IN_BATCH_E2E, Goodput, SloBound, SloMetric, Slos, judge, judging_runs


def test_a_metric_is_named_as_vllm_prints_it():
    assert SloMetric.parse("p99_tpot_ms") == SloMetric("p99_tpot_ms", "tpot", "p99", 99.0)
    assert SloMetric.parse("p50_ttft_ms") == SloMetric("median_ttft_ms", "ttft", "median", 50.0)
    assert SloMetric.parse(IN_BATCH_E2E).in_batch
    with pytest.raises(AdvisorError, match="unknown SLO metric 'p99_latency'"):
        SloMetric.parse("p99_latency")
    with pytest.raises(AdvisorError, match="is a spread"):
        SloMetric.parse("std_itl_ms")


@pytest.mark.parametrize("text, fragment", [
    ("p99_tpot_ms", "expected NAME=MILLISECONDS or NAME=Kx"),
    ("p99_tpot_ms=0", "the bound must be > 0"),
    ("p99_tpot_ms=1e999", "the bound must be > 0"),
    ("p99_tpot_ms=1e", "'1e' is not a number"),
])
def test_a_bound_that_is_not_a_positive_number_is_refused(text, fragment):
    with pytest.raises(AdvisorError, match=fragment):
        SloBound.parse(text)


def test_absolute_and_relative_bounds_and_the_shorthands():
    absolute, relative = SloBound.parse("p99_tpot_ms=50"), SloBound.parse("p99_itl_ms=2x")
    assert absolute.limit() == 50.0 and not absolute.relative
    assert relative.relative and math.isnan(relative.limit()) and relative.limit(12.5) == 25.0
    slos = Slos.of(["p99_tpot_ms=50"], slo_ms=8000.0, reference_cap=4)
    assert [b.metric.name for b in slos.bounds] == ["p99_tpot_ms", IN_BATCH_E2E]
    assert slos.describe() == "p99_tpot_ms <= 50 ms, mean_in_batch_e2e_ms <= 8000 ms"
    assert Slos.of(slo_relative=1.5).describe() == "mean_in_batch_e2e_ms <= 1.5x cap 1's"
    with pytest.raises(AdvisorError, match="names p99_tpot_ms twice"):
        Slos.of(["p99_tpot_ms=50", "p99_tpot_ms=2x"])
    with pytest.raises(AdvisorError, match="state an objective"):
        Slos.of()


def test_goodput_reads_vllms_syntax_and_counts_the_requests_meeting_every_bound():
    goodput = Goodput.parse(["tpot:50", "ttft:2000"])
    assert goodput.spec == "ttft:2000 tpot:50", "in vLLM's key order"
    fraction = goodput.good_fraction({"ttft": np.array([100.0, 3000.0, 500.0, 900.0]),
                                      "tpot": np.array([10.0, 10.0, 60.0, 50.0])})
    assert fraction == 0.5
    for pairs, fragment in ((["itl:5"], "KEY one of ttft, tpot, e2el"), (["ttft:-1"], "must be > 0"), ([], "at least")):
        with pytest.raises(AdvisorError, match=fragment):
            Goodput.parse(pairs)


def runs_table(**columns) -> pd.DataFrame:
    frame = pd.DataFrame({col.MAX_NUM_SEQS: [8.0, 8.0, 8.0], col.NUM_PROMPTS: [1000.0, 1000.0, 8.0],
                          col.REQUEST_RATE: [math.inf, math.inf, math.inf],
                          col.MAX_CONCURRENCY: [np.nan, 8.0, np.nan],
                          col.BENCHMARK_MODE: [col.BenchmarkMode.ONLINE] * 3,
                          col.E2E_LATENCY_S: [1.0, 1.0, 1.0], "p99_ttft_ms": [900.0, 40.0, 30.0],
                          "p99_tpot_ms": [12.0, 11.0, 10.0]})
    return frame.assign(**columns)


def test_ttft_is_judged_only_where_the_client_does_not_flood_the_server():
    runs = runs_table()
    # run 0: 1000 requests at once to 8 slots (queueing); run 1: --max-concurrency 8; run 2: 8 requests for 8 slots
    assert list(judging_runs(SloMetric.parse("p99_ttft_ms"), runs)) == [False, True, True]
    assert list(judging_runs(SloMetric.parse("p99_tpot_ms"), runs)) == [True, True, True]
    flooded = runs.iloc[:1]
    problems = judge(Slos.of(["p99_ttft_ms=2000", "p99_tpot_ms=20"]), flooded).problems
    assert len(problems) == 1 and "--max-concurrency" in problems[0] and "p99_ttft_ms" in problems[0]


def test_an_offline_static_batch_judges_only_the_in_batch_e2e():
    offline = runs_table(**{col.BENCHMARK_MODE: [col.BenchmarkMode.OFFLINE_STATIC_BATCH] * 3})
    assert not judging_runs(SloMetric.parse("p99_tpot_ms"), offline).any()
    assert judging_runs(SloMetric.parse(IN_BATCH_E2E), offline).all()
    problem = judge(Slos.of(["p99_tpot_ms=20"]), offline).problems[0]
    assert "offline static batches" in problem
