"""Every layout vLLM and GuideLLM users produce (tests/data/formats/, written by
tests/data/make_layouts.py) ingests to usable runs, and `slim advise` recommends a cap from each."""

from __future__ import annotations

import filecmp
from pathlib import Path

import pandas as pd
import pytest
from conftest import load_data_generator

from slim import columns as col
from slim.advisor.advise import AdviceRequest, advise
from slim.model import fit as fit_module
from slim.specs.architecture import MODELS_FILE
from slim.specs.hardware import HARDWARE_FILE
from slim.traces.clean import clean_runs
from slim.traces.ingest import ingest_traces
from slim.traces.results import FORMAT_GUIDELLM, FORMAT_VLLM_BENCH_SERVE, FORMAT_VLLM_BENCH_SWEEP

REPO = Path(__file__).resolve().parents[1]
FORMATS = REPO / "tests" / "data" / "formats"


LAYOUTS = load_data_generator("make_layouts")


@pytest.fixture(scope="module")
def layouts(catalog) -> dict[str, pd.DataFrame]:
    return {name: ingest_traces(FORMATS / name, name, catalog) for name in LAYOUTS.LAYOUTS}


def test_committed_layouts_equal_their_generator(tmp_path):
    LAYOUTS.build_layouts(tmp_path)
    generated = {p.relative_to(tmp_path) for p in tmp_path.rglob("*") if p.is_file()}
    committed = {p.relative_to(FORMATS) for name in LAYOUTS.LAYOUTS + LAYOUTS.OFFLINE_LAYOUTS
                 for p in (FORMATS / name).rglob("*") if p.is_file()}
    assert generated == committed, "rerun tests/data/make_layouts.py"
    for relative in generated:
        assert filecmp.cmp(tmp_path / relative, FORMATS / relative, shallow=False), f"{relative} differs"


@pytest.mark.parametrize("name", LAYOUTS.LAYOUTS)
def test_every_run_of_every_layout_is_usable(name, layouts):
    runs = layouts[name]
    usable, report = clean_runs(runs)
    expected_runs = 2 * len(LAYOUTS.CAPS) if name == "bench_sweep_serve" else len(LAYOUTS.CAPS)
    assert len(runs) == expected_runs
    assert runs[col.STATUS].eq("ok").all(), runs[[col.RUN_ID, col.REASON_DETAIL]].to_string()
    assert sorted(usable[col.MAX_NUM_SEQS]) == list(LAYOUTS.CAPS)
    assert usable[col.MODEL].eq("opt-1.3b").all()
    assert usable[col.INPUT_LEN_NOMINAL].eq(256).all() and usable[col.OUTPUT_LEN_NOMINAL].eq(128).all()
    # Every source recovers the made-up server's running batch, 95% of the cap.
    expected_batch = usable[col.MAX_NUM_SEQS].map(LAYOUTS.running_batch)
    assert usable[col.MEAN_BATCH_SIZE].to_numpy() == pytest.approx(expected_batch.to_numpy(), rel=1e-3)


@pytest.mark.parametrize("name, source", [
    ("bench_serve_metadata", "metrics_csv"),            # the server's own samples win
    ("bench_serve_v1_log", "littles_law"),              # not the log's few 10-s lines
    ("bench_serve_vllm_serve_log", "littles_law"),      # the log recognised by its content
    ("flat_result_dir", "littles_law, cap = client max_concurrency"),
    ("bench_sweep_serve", "littles_law"),
    ("client_concurrency", "littles_law, cap = client max_concurrency"),
    ("append_result", "littles_law, cap = client max_concurrency"),
    ("guidellm_sweep", "littles_law, cap = client max_concurrency"),
    ("guidellm_per_folder", "littles_law, cap = client max_concurrency"),
    ("prometheus_scrapes", "prometheus_text"),
    ("grafana_export", "metrics_csv"),
])
def test_batch_size_source_says_where_the_batch_and_the_cap_came_from(name, source, layouts):
    assert set(layouts[name][col.BATCH_SIZE_SOURCE]) == {source}


def test_v1_server_logs_give_the_cap_and_the_kv_capacity(layouts):
    for name in ("bench_serve_v1_log", "bench_serve_vllm_serve_log", "flat_result_dir"):
        runs = layouts[name]
        assert runs[col.KV_CAPACITY_TOKENS].eq(LAYOUTS.KV_CACHE_TOKENS).all(), name   # "GPU KV cache size"
        assert runs[col.NUM_GPU_BLOCKS].eq(LAYOUTS.KV_CACHE_TOKENS // 16).all(), name
    # The flat folder's server log names no max_num_seqs (the server's default): the client's cap counts.
    assert "cap = client max_concurrency" in layouts["flat_result_dir"][col.REASON_DETAIL].iloc[0]


def test_several_runs_per_folder_or_file_get_one_row_each(layouts):
    flat = layouts["flat_result_dir"][col.RUN_ID]
    assert flat.str.match(r"^openai-infqps-concurrency\d+-opt-1\.3b-\d{8}-\d{6}\.json$").all()
    assert list(layouts["append_result"][col.RUN_ID]) == sorted(f"results.json[{i}]" for i in range(9))
    assert set(layouts["guidellm_sweep"][col.RUN_ID]) == {f"benchmarks.json[{i}]" for i in range(9)}
    assert layouts["guidellm_per_folder"][col.RUN_ID].str.match(r"^concurrent_\d+$").all()


def test_sweep_repetitions_keep_the_first_and_name_the_rest_duplicates(layouts):
    runs = layouts["bench_sweep_serve"]
    assert set(runs[col.TRACE_FORMAT]) == {FORMAT_VLLM_BENCH_SWEEP}
    _, report = clean_runs(runs)
    statuses = report.set_index(col.RUN_ID)[col.STATUS]
    assert statuses[statuses.index.str.endswith("run=0.json")].eq("ok").all()
    assert statuses[statuses.index.str.endswith("run=1.json")].eq("duplicate").all()


def test_trace_formats_name_the_producer(layouts):
    assert set(layouts["guidellm_sweep"][col.TRACE_FORMAT]) == {FORMAT_GUIDELLM}
    assert set(layouts["client_concurrency"][col.TRACE_FORMAT]) == {FORMAT_VLLM_BENCH_SERVE}


def test_prometheus_scrapes_give_the_kv_blocks_from_cache_config_info(layouts):
    runs = layouts["prometheus_scrapes"]
    assert runs[col.NUM_GPU_BLOCKS].eq(LAYOUTS.KV_CACHE_TOKENS // 16).all()
    assert runs[col.NUM_PREEMPTIONS].eq(0).all()


@pytest.fixture(scope="module")
def advice_per_layout():
    """`slim advise` on every layout. The layouts describe one server, so their training tables
    are equal up to run names: the SLIM fit (seconds each, tested in test_fit.py) is computed once
    per distinct table, and everything else, ingest to BCA, runs per layout."""
    fits: dict[bytes, object] = {}
    fit_slim = fit_module.fit_slim

    def fit_once(frame, *args, **kwargs):
        table = frame[list(fit_module.FIT_INPUT_COLUMNS)].sort_values(col.MEAN_BATCH_SIZE)
        key = table.round(6).to_csv(index=False).encode()
        if key not in fits:
            fits[key] = fit_slim(frame, *args, **kwargs)
        return fits[key]

    with pytest.MonkeyPatch.context() as patch:
        # The registered SLIM predictor looks fit_slim up where it fits.
        patch.setattr(fit_module, "fit_slim", fit_once)
        return {name: advise(AdviceRequest(FORMATS / name, "opt-1.3b", 256, 128, slo_s=1.5, epsilon=0.3,
                                           hardware="h100-64gb", models_file=MODELS_FILE,
                                           hardware_file=HARDWARE_FILE, plan=False))
                for name in LAYOUTS.LAYOUTS}


@pytest.mark.parametrize("name", LAYOUTS.LAYOUTS)
def test_slim_advise_recommends_a_cap_for_every_layout(name, advice_per_layout):
    decision = advice_per_layout[name].recommendation
    assert decision.feasible and decision.values_ms["mean_in_batch_e2e_ms"] <= 1500 and decision.efficiency > 0.3
    assert decision.measured, "every layout measured the chosen cap: the decision rests on the runs"
    # Every layout describes the same server, so every layout gives the same recommendation.
    assert decision.batch_cap == advice_per_layout["bench_serve_metadata"].recommendation.batch_cap
    assert 16 <= decision.batch_cap <= 128
