"""Offline benchmarks (tests/data/formats/, written by tests/data/make_layouts.py from vLLM's
latency.py / throughput.py formats): `vllm bench latency` with its .pytorch.json, an .args.json
sidecar or a file-name pattern, `vllm bench throughput`, summary tables in the vocabulary or
through a column mapping; the KV-fit exclusion of static batches; repeated points averaged."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd
import pytest
from conftest import load_data_generator

from slim import cli
from slim import columns as col
from slim.gpu.kv_memory import static_batch_fit
from slim.specs.hardware import load_hardware
from slim.traces.clean import clean_runs
from slim.traces.ingest import ingest_traces
from slim.traces.offline_ingest import IngestOptions
from slim.traces.offline_json import FORMAT_VLLM_BENCH_LATENCY, FORMAT_VLLM_BENCH_THROUGHPUT
from slim.traces.static_batch import AcceleratorLookup
from slim.traces.summary_table import FORMAT_SUMMARY_TABLE, TableLayout

REPO = Path(__file__).resolve().parents[1]
FORMATS = REPO / "tests" / "data" / "formats"
LAYOUTS = load_data_generator("make_layouts")
HARDWARE = load_hardware()
ON_A100 = IngestOptions(AcceleratorLookup(HARDWARE["a100-80gb"]))
LATENCY_LAYOUTS = ("bench_latency_pytorch", "bench_latency_sidecar", "bench_latency_file_names")


def _ingest(name_or_path, catalog, options: IngestOptions = ON_A100) -> pd.DataFrame:
    path = name_or_path if isinstance(name_or_path, Path) else FORMATS / name_or_path
    return ingest_traces(path, "offline", catalog, options)


@pytest.mark.parametrize("name", LATENCY_LAYOUTS)
def test_vllm_bench_latency_gives_one_static_batch_per_result(name, catalog):
    runs = _ingest(name, catalog).set_index(col.MAX_NUM_SEQS)
    assert sorted(runs.index) == list(LAYOUTS.OFFLINE_BATCHES)
    assert (runs[col.TRACE_FORMAT] == FORMAT_VLLM_BENCH_LATENCY).all()
    assert (runs[col.BENCHMARK_MODE] == col.BenchmarkMode.OFFLINE_STATIC_BATCH).all()
    # opt-1.3b on an A100 80 GB reserves 374,368 KV tokens: 128 x 2048 fit, 256 x 2048 do not.
    assert runs.loc[256, col.STATUS] == "kv_cache_overflow"
    assert "524288 tokens" in runs.loc[256, col.REASON_DETAIL] and "374368" in runs.loc[256, col.REASON_DETAIL]
    ok = runs.drop(index=256)
    assert (ok[col.STATUS] == "ok").all()
    assert (ok[col.MEAN_BATCH_SIZE] == ok.index).all() and (ok[col.HARDWARE] == "a100-80gb").all()
    for batch, run in ok.iterrows():
        latency = sum(LAYOUTS.latency_result(int(batch))["latencies"]) / LAYOUTS.OFFLINE_ITERATIONS
        assert run[col.DURATION_S] == pytest.approx(latency, rel=1e-12)
        assert run[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(batch * 2 * LAYOUTS.OFFLINE_LEN / latency, rel=1e-12)
        assert run[col.E2E_LATENCY_S] == pytest.approx(latency, rel=1e-12)   # one static batch: its latency
        assert run[col.MODEL] == "opt-1.3b" and run[col.INPUT_LEN_NOMINAL] == LAYOUTS.OFFLINE_LEN


def test_without_an_accelerator_the_kv_fit_is_not_checked_and_said(catalog):
    runs = _ingest("bench_latency_pytorch", catalog, IngestOptions()).set_index(col.MAX_NUM_SEQS)
    assert (runs[col.STATUS] == "ok").all()
    assert runs.loc[256, col.REASON_DETAIL].endswith("KV cache fit not checked: no accelerator given)")
    assert runs[col.HARDWARE].isna().all()


def test_vllm_bench_throughput_waves_give_the_cap_or_no_batch(catalog):
    runs = _ingest("bench_throughput", catalog).set_index(col.NUM_PROMPTS)
    assert (runs[col.TRACE_FORMAT] == FORMAT_VLLM_BENCH_THROUGHPUT).all()
    assert (runs[col.BENCHMARK_MODE] == col.BenchmarkMode.OFFLINE_THROUGHPUT).all()
    assert runs.loc[100, col.STATUS] == "missing_metrics"
    assert "last of 2 waves runs 36" in runs.loc[100, col.REASON_DETAIL]
    for requests in (64, 128, 256):
        run, result = runs.loc[requests], LAYOUTS.throughput_result(requests)
        assert run[col.STATUS] == "ok" and run[col.MEAN_BATCH_SIZE] == 64 and run[col.MAX_NUM_SEQS] == 64
        assert run[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(result["tokens_per_second"], rel=1e-12)
        # Little's law: 64 running / (N / elapsed) = the time of one wave
        assert run[col.E2E_LATENCY_S] == pytest.approx(result["elapsed_time"] * 64 / requests, rel=1e-12)


def test_a_summary_table_averages_its_repeated_point(catalog):
    runs = _ingest("summary_table", catalog)
    assert (runs[col.TRACE_FORMAT] == FORMAT_SUMMARY_TABLE).all() and len(runs) == len(LAYOUTS.OFFLINE_BATCHES) + 1
    usable, report = clean_runs(runs)
    assert sorted(usable[col.MAX_NUM_SEQS]) == [b for b in LAYOUTS.OFFLINE_BATCHES if b != 256]
    point = usable.set_index(col.MAX_NUM_SEQS).loc[16]
    latency = LAYOUTS.static_batch_latency_s(16)
    mean = (round(latency, 6) + round(latency * 1.02, 6)) / 2
    assert point[col.N_MEASUREMENTS] == 2 and point[col.DURATION_S] == pytest.approx(mean, rel=1e-12)
    assert point[col.MEASUREMENT_SPREAD_PCT] == pytest.approx(100 * 0.02 / 1.01, rel=1e-4)
    assert point[col.TOTAL_TOKEN_THROUGHPUT] == pytest.approx(16 * 2048 / mean, rel=1e-12)
    second = report.set_index(col.RUN_ID).loc["points.csv[9]"]
    assert second[col.STATUS] == "aggregated" and second[col.REASON_DETAIL].endswith("averaged into points.csv[4]")
    assert not second["kept"]


def test_a_table_with_other_headers_is_read_through_the_mapping(catalog, tmp_path):
    table = pd.read_csv(FORMATS / "summary_table" / "points.csv").rename(columns={
        "model": "Model", "hardware": "GPU", "batch_size": "BS", "input_len": "In", "output_len": "Out",
        "latency_s": "Seconds"}).drop(columns=["total_token_throughput_per_s"])
    table["GPU"] = "Big GPU"
    table.loc[0, "GPU"] = "Other GPU"
    table.to_parquet(tmp_path / "points.parquet")
    unmapped = _ingest(tmp_path, catalog)
    assert unmapped.empty or not (unmapped[col.TRACE_FORMAT] == FORMAT_SUMMARY_TABLE).any()
    layout = TableLayout({"model": "Model", "hardware": "GPU", "batch_size": "BS", "input_len": "In",
                          "output_len": "Out", "latency_s": "Seconds"}, {"Big GPU": "a100-80gb"})
    options = IngestOptions(AcceleratorLookup(None, {"Big GPU": HARDWARE["a100-80gb"]}), layout)
    runs = _ingest(tmp_path, catalog, options).set_index(col.RUN_ID)
    assert runs.loc["points.parquet[0]", col.STATUS] == "unknown_hardware"
    assert "'Other GPU'" in runs.loc["points.parquet[0]", col.REASON_DETAIL]
    assert runs.loc["points.parquet[8]", col.STATUS] == "kv_cache_overflow"
    assert (runs.drop(index=["points.parquet[0]", "points.parquet[8]"])[col.STATUS] == "ok").all()


def test_bad_rows_and_tables_are_reported_not_raised(catalog, tmp_path):
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "points.csv").write_text(
        "model,batch_size,input_len,output_len,latency_s,total_token_throughput_per_s\n"
        "opt-1.3b,4,128,128,-1,\n"                                   # negative latency
        "opt-1.3b,4,128,128,2.0,999\n"                               # throughput contradicts 4 x 256 / 2
        "mistralai/Mixtral-8x7B-v0.1,4,128,128,2.0,512\n"
        "Deci/DeciLM-7B,4,128,128,2.0,\n"
        "some/unknown-7b,4,128,128,2.0,\n"
        "opt-1.3b,2.5,128,128,2.0,\n")                               # fractional batch
    (tmp_path / "other").mkdir()   # a Parquet file that is no table is no run file, as any unknown file
    (tmp_path / "other" / "points.parquet").write_bytes(b"not parquet")
    runs = _ingest(tmp_path, catalog).set_index(col.RUN_ID)
    statuses = runs[col.STATUS].to_dict()
    assert statuses == {"bad/points.csv[0]": "invalid_values", "bad/points.csv[1]": "implausible",
                        "bad/points.csv[2]": "implausible", "bad/points.csv[3]": "unsupported_model",
                        "bad/points.csv[4]": "unknown_model", "bad/points.csv[5]": "invalid_values"}
    # Described (a mixture of experts is modelled), but its 16-bit weights do not fit the default accelerator.
    assert "weights need 87.0 GiB per rank at TP 1" in runs.loc["bad/points.csv[2]", col.REASON_DETAIL]
    assert runs.loc["bad/points.csv[2]", col.MODEL] == "mixtral-8x7b"
    assert "num_key_value_heads_per_layer" in runs.loc["bad/points.csv[3]", col.REASON_DETAIL]
    assert "999" in runs.loc["bad/points.csv[1]", col.REASON_DETAIL]


def test_an_offline_result_without_arguments_or_with_options_slim_does_not_model(catalog, tmp_path):
    result = LAYOUTS.latency_result(4)
    (tmp_path / "plain.json").write_text(json.dumps(result))
    (tmp_path / "beams.json").write_text(json.dumps(result))
    args = {"model": "opt-1.3b", "batch_size": 4, "input_len": 128, "output_len": 128, "n": 2}
    (tmp_path / "beams.args.json").write_text(json.dumps(args))
    (tmp_path / "broken.json").write_text(json.dumps(result))
    (tmp_path / "broken.pytorch.json").write_text("[{")
    runs = _ingest(tmp_path, catalog).set_index(col.RUN_ID)
    assert runs.loc["plain.json", col.STATUS] == "missing_metadata"
    assert "plain.pytorch.json" in runs.loc["plain.json", col.REASON_DETAIL]
    assert runs.loc["beams.json", col.STATUS] == "unsupported_benchmark"
    assert runs.loc["broken.json", col.STATUS] == "corrupt"
    assert "broken.pytorch.json" in runs.loc["broken.json", col.REASON_DETAIL]


def test_slim_check_reads_a_single_table_file(capsys):
    assert cli.main(["check", str(FORMATS / "summary_table" / "points.csv")]) == 0
    header, *lines = capsys.readouterr().out.splitlines()
    assert header.split("\t") == ["status", "run", "fault_file", "model", "input_len", "output_len", "max_num_seqs",
                                  "reason"]
    assert len(lines) == len(LAYOUTS.OFFLINE_BATCHES) + 1
    assert lines[4].startswith("ok\tpoints.csv[4]\t-\topt-1.3b\t") and "mean of 2 measurements" in lines[4]
    assert lines[9].startswith("aggregated\tpoints.csv[9]")


def test_static_batch_fit_splits_weights_and_kv_over_the_ranks(catalog):
    """Llama-2-70B on A100 40 GB: 128.5 GiB of weights do not fit one or two GPUs; at TP 4 each rank
    keeps 0.9 x 40 - 32.12 - 1 = 2.88 GiB for 1,024 x 2 x 80 x 2 bytes per token: 37,744 tokens."""
    arch, a100 = catalog["llama-2-70b"], HARDWARE["a100-sxm-40gb"]
    assert not static_batch_fit(arch, a100, 1, 128, 128, 2).weights_fit
    fit = static_batch_fit(arch, a100, 16, 2048, 2048, 4)
    per_token = 2 * 80 * (8 // 4) * 128 * 2
    reservation = 0.9 * 40 * 2**30 - arch.n_params * 2 / 4 - 2**30
    assert fit.kv_capacity_tokens == math.floor(reservation / (16 * per_token)) * 16 == 37744
    assert fit.kv_tokens_needed == 16 * 4096 and not fit.fits
    assert static_batch_fit(arch, a100, 8, 2048, 2048, 4).fits
