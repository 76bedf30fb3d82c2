"""Column names of the tables that flow through the pipeline, and one check that a table has them.

`runs.parquet` (ingest) holds one row per run directory with the run columns below;
`clean.parquet` holds the rows whose status is ``ok``. The prediction and MAPE tables of
the held-out evaluation and of Fig. 11 follow. Units are in the names.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

from slim.errors import ConfigError, SlimError

# Identity of a run.
DATASET = "dataset"
RUN_ID = "run_id"                      # run directory, relative to the trace root
TRACE_FORMAT = "trace_format"          # benchmark_serving (public), vllm_bench_serve, vllm_bench_sweep, guidellm,
                                       # vllm_bench_latency, vllm_bench_throughput, summary_table
BENCHMARK_MODE = "benchmark_mode"      # one of BENCHMARK_MODES
HARDWARE = "hardware"                  # key of the accelerator in the hardware file (None: not given)
MODEL = "model"                        # canonical name from the models file (raw name if unknown)
MAX_NUM_SEQS = "max_num_seqs"          # server flag --max-num-seqs
TENSOR_PARALLEL = "tensor_parallel"    # server flag --tensor-parallel-size (GPUs per model; 1 if unset)
NUM_PROMPTS = "num_prompts"
VLLM_VERSION = "vllm_version"          # the server's vLLM release, where known (optional: absent or NaN = unknown)

# Workload.
INPUT_LEN_MEAN = "input_len_mean"      # total_input_tokens / completed
OUTPUT_LEN_MEAN = "output_len_mean"    # total_output_tokens / completed
INPUT_LEN_NOMINAL = "input_len_nominal"    # sweep label: client's random_input_len, else rounded mean
OUTPUT_LEN_NOMINAL = "output_len_nominal"  # sweep label: client's sharegpt/random output len, else rounded mean

# Benchmark summary (client JSON).
COMPLETED = "completed"
FAILED = "failed"
DURATION_S = "duration_s"
REQUEST_THROUGHPUT = "request_throughput_per_s"
TOTAL_TOKEN_THROUGHPUT = "total_token_throughput_per_s"   # SLIM's T, Eq. 6
OUTPUT_TOKEN_THROUGHPUT = "output_token_throughput_per_s"
# The client's latency statistics, under vLLM's own names: `latency_column(statistic, quantity)`,
# e.g. mean_ttft_ms, median_tpot_ms, std_itl_ms, p99_e2el_ms. TTFT and E2EL include the time a
# request queued; TPOT (per request, first token excluded) and ITL (every gap between tokens) do not.
LATENCY_QUANTITIES = ("ttft", "tpot", "itl", "e2el")
LATENCY_STATISTICS = ("mean", "median", "std", "p99")
"""The statistics every runs table holds a column for; other percentiles a run recorded (vLLM's
``--metric-percentiles``, GuideLLM's, a histogram's) get columns of their own (`latency_columns`)."""
MEAN_TTFT_MS = "mean_ttft_ms"
MEAN_TPOT_MS = "mean_tpot_ms"
MEAN_ITL_MS = "mean_itl_ms"
MEAN_E2EL_MS = "mean_e2el_ms"          # client's E2E (includes queueing); NaN in the old format
REQUEST_RATE = "request_rate_per_s"    # the client's --request-rate (inf: every request at once)
MAX_CONCURRENCY = "max_concurrency"    # the client's cap on requests in flight (NaN: none)
REQUEST_GOODPUT = "request_goodput_per_s"  # vLLM's request_goodput where the run recorded one (its spec unknown)
LATENCY_SOURCE = "latency_source"      # client (the benchmark's JSON), guidellm, or prometheus_histogram
# Per-request latencies (lists, ms) of a run saved with vLLM's --save-detailed: columns only where some run has them.
REQUEST_TTFT_MS = "request_ttft_ms"
REQUEST_TPOT_MS = "request_tpot_ms"
REQUEST_E2EL_MS = "request_e2el_ms"
PER_REQUEST_COLUMNS = (REQUEST_TTFT_MS, REQUEST_TPOT_MS, REQUEST_E2EL_MS)

# Server side (metrics CSV / server log / cache config).
MEAN_BATCH_SIZE = "mean_batch_size"    # mean num_requests_running over the active benchmark window
BATCH_SIZE_SOURCE = "batch_size_source"  # metrics_csv, prometheus_text, littles_law or server_log (+ cap note)
MAX_KV_CACHE_USAGE = "max_kv_cache_usage"  # 0..1
NUM_PREEMPTIONS = "num_preemptions"
NUM_GPU_BLOCKS = "num_gpu_blocks"
BLOCK_SIZE = "block_size"
KV_CAPACITY_TOKENS = "kv_capacity_tokens"  # num_gpu_blocks x block_size

# Derived.
E2E_LATENCY_S = "e2e_latency_s"        # Little's law: mean_batch_size / request_throughput

# Repeated measurements of one offline point, averaged by cleaning (slim.traces.clean).
N_MEASUREMENTS = "n_measurements"      # results averaged into this run (1: measured once)
MEASUREMENT_SPREAD_PCT = "measurement_spread_pct"  # 100 (max - min) / mean of their latencies; NaN if one

# Accounting.
STATUS = "status"
REASON_DETAIL = "reason_detail"
FAULT_FILE = "fault_file"              # the file at fault (relative to the run directory); "" if none

class BenchmarkMode:
    """The values of `BENCHMARK_MODE` (`BENCHMARK_MODES`)."""

    ONLINE = "online"
    OFFLINE_STATIC_BATCH = "offline_static_batch"
    OFFLINE_THROUGHPUT = "offline_throughput"


BENCHMARK_MODES = (BenchmarkMode.ONLINE, BenchmarkMode.OFFLINE_STATIC_BATCH, BenchmarkMode.OFFLINE_THROUGHPUT)
"""How a run was measured: ``online`` (a server under a client: `vllm bench serve`, GuideLLM; the
running batch is measured), ``offline_static_batch`` (`vllm bench latency` or a summary table: B
requests submitted at once and run as one batch; the mean batch is the configured B where its KV
cache fits) and ``offline_throughput`` (`vllm bench throughput`: N requests at once, run by the
engine up to max_num_seqs at a time)."""

RUN_COLUMNS = (
    DATASET, RUN_ID, TRACE_FORMAT, BENCHMARK_MODE, HARDWARE, MODEL, MAX_NUM_SEQS, TENSOR_PARALLEL, NUM_PROMPTS,
    INPUT_LEN_MEAN, OUTPUT_LEN_MEAN, INPUT_LEN_NOMINAL, OUTPUT_LEN_NOMINAL,
    COMPLETED, FAILED, DURATION_S, REQUEST_THROUGHPUT, TOTAL_TOKEN_THROUGHPUT, OUTPUT_TOKEN_THROUGHPUT,
    *(f"{statistic}_{quantity}_ms" for quantity in LATENCY_QUANTITIES for statistic in LATENCY_STATISTICS),
    REQUEST_RATE, MAX_CONCURRENCY, REQUEST_GOODPUT, LATENCY_SOURCE,
    MEAN_BATCH_SIZE, BATCH_SIZE_SOURCE, MAX_KV_CACHE_USAGE, NUM_PREEMPTIONS, NUM_GPU_BLOCKS, BLOCK_SIZE,
    KV_CAPACITY_TOKENS, E2E_LATENCY_S, N_MEASUREMENTS, MEASUREMENT_SPREAD_PCT, STATUS, REASON_DETAIL, FAULT_FILE,
)
"""Columns of `runs.parquet` and `clean.parquet`, in order; a table may hold more latency statistics
(`latency_columns`) and the per-request lists (`PER_REQUEST_COLUMNS`) after them."""

_LATENCY_COLUMN = re.compile(r"^(mean|median|std|p(\d+(?:\.\d+)?))_(ttft|tpot|itl|e2el)_ms$")


def latency_column(statistic: str, quantity: str) -> str:
    """vLLM's name of a latency statistic: ``p99`` and ``tpot`` give ``p99_tpot_ms``."""
    return f"{statistic}_{quantity}_ms"


def parse_latency_column(name: str) -> tuple[str, str, float | None] | None:
    """``(statistic, quantity, percentile)`` of a latency column (percentile None unless a ``p<N>``
    statistic: ``p99.9_itl_ms`` gives ``("p99.9", "itl", 99.9)``), or None for any other name."""
    match = _LATENCY_COLUMN.match(name)
    if match is None:
        return None
    return match.group(1), match.group(3), float(match.group(2)) if match.group(2) else None


def latency_columns(names: Iterable[str]) -> list[str]:
    """The latency columns among `names`, in a stable order: by quantity (TTFT, TPOT, ITL, E2EL),
    then mean, median, std and the percentiles in increasing order."""
    order = {"mean": -3.0, "median": -2.0, "std": -1.0}
    parsed = [(name, parse_latency_column(name)) for name in names]
    found = [(name, p) for name, p in parsed if p is not None]
    return [name for name, p in sorted(found, key=lambda item: (
        LATENCY_QUANTITIES.index(item[1][1]), order.get(item[1][0], item[1][2] if item[1][2] is not None else 0.0)))]


def run_table_columns(names: Iterable[str]) -> list[str]:
    """The columns of a runs table holding `names`: `RUN_COLUMNS`, then every other latency column
    and the per-request lists that occur."""
    names = set(names)
    extra = [name for name in latency_columns(names) if name not in RUN_COLUMNS]
    return [*RUN_COLUMNS, *extra, *(name for name in PER_REQUEST_COLUMNS if name in names)]

WORKLOAD_KEYS = (MODEL, INPUT_LEN_NOMINAL, OUTPUT_LEN_NOMINAL)
"""A measured curve: all runs sharing these keys, indexed by max_num_seqs."""


# --- Prediction tables: one row per (setting, predictor, run) of the held-out evaluation
# (results/<dataset>/evaluation/<setting>.parquet), or per target run of Fig. 11.
SETTING = "setting"                    # held-out setting name (config/settings/<dataset>.yaml)
PREDICTOR = "predictor"                # SLIM, an ablation or a baseline (display name)
ROLE = "role"                          # "validate", "train" (SLIM only) or "target" (Fig. 11)
MEASURED_THROUGHPUT = "measured_throughput"      # total tokens/s
PREDICTED_THROUGHPUT = "predicted_throughput"
MEASURED_E2E_S = "measured_e2e_s"                # Little's law, seconds
PREDICTED_E2E_S = "predicted_e2e_s"
# The mean batch the predictor predicted from the configuration (SIM, and SLIM fed with it);
# NaN for predictors that take the measured mean batch (MEAN_BATCH_SIZE) as an input.
PREDICTED_MEAN_BATCH_SIZE = "predicted_mean_batch_size"
# The prediction band (slim.model.uncertainty for SLIM, statsmodels for IMAI OOD-LR) at the
# confidence slim.paper.heldout.BAND_CONFIDENCE; NaN for predictors without one.
PREDICTED_THROUGHPUT_LOW = "predicted_throughput_band_low"
PREDICTED_THROUGHPUT_HIGH = "predicted_throughput_band_high"
PREDICTED_E2E_LOW_S = "predicted_e2e_s_band_low"
PREDICTED_E2E_HIGH_S = "predicted_e2e_s_band_high"
# The conformal prediction interval of a run (slim.model.conformal: scores from leave-one-curve-out
# refits on the training runs) at slim.paper.heldout.BAND_CONFIDENCE; SLIM and SIM only, else NaN.
PREDICTED_THROUGHPUT_CONFORMAL_LOW = "predicted_throughput_conformal_low"
PREDICTED_THROUGHPUT_CONFORMAL_HIGH = "predicted_throughput_conformal_high"
PREDICTED_E2E_CONFORMAL_LOW_S = "predicted_e2e_s_conformal_low"
PREDICTED_E2E_CONFORMAL_HIGH_S = "predicted_e2e_s_conformal_high"

PREDICTION_COLUMNS = (
    SETTING, PREDICTOR, RUN_ID, MODEL, MAX_NUM_SEQS, INPUT_LEN_MEAN, OUTPUT_LEN_MEAN, OUTPUT_LEN_NOMINAL,
    MEAN_BATCH_SIZE, PREDICTED_MEAN_BATCH_SIZE, MEASURED_THROUGHPUT, PREDICTED_THROUGHPUT, MEASURED_E2E_S,
    PREDICTED_E2E_S, ROLE, PREDICTED_THROUGHPUT_LOW, PREDICTED_THROUGHPUT_HIGH, PREDICTED_E2E_LOW_S,
    PREDICTED_E2E_HIGH_S, PREDICTED_THROUGHPUT_CONFORMAL_LOW, PREDICTED_THROUGHPUT_CONFORMAL_HIGH,
    PREDICTED_E2E_CONFORMAL_LOW_S, PREDICTED_E2E_CONFORMAL_HIGH_S,
)
"""Columns of a held-out prediction table, in order."""

# --- MAPE tables: one row per (setting, predictor) over the validation rows (table3.csv).
N_VALIDATION = "n_validation"
N_RUNS = "n_runs"
MAPE_THROUGHPUT_PCT = "mape_throughput_pct"
MAPE_E2E_PCT = "mape_e2e_pct"
MAPE_MEAN_BATCH_PCT = "mape_mean_batch_pct"  # NaN where the predictor is given the measured mean batch
# Share of the validation runs inside their conformal interval (%); NaN without one.
COVERAGE_THROUGHPUT_PCT = "coverage_throughput_pct"
COVERAGE_E2E_PCT = "coverage_e2e_pct"

MAPE_COLUMNS = (SETTING, PREDICTOR, N_VALIDATION, MAPE_THROUGHPUT_PCT, MAPE_E2E_PCT, MAPE_MEAN_BATCH_PCT,
                COVERAGE_THROUGHPUT_PCT, COVERAGE_E2E_PCT)
"""Columns of a held-out MAPE table, in order."""

# --- Bootstrap confidence intervals of the MAPEs (slim.paper.mape_intervals), one row per
# (setting, predictor), joined into table3.csv beside each MAPE.
MAPE_THROUGHPUT_CI_LOW_PCT = "mape_throughput_pct_ci_low"
MAPE_THROUGHPUT_CI_HIGH_PCT = "mape_throughput_pct_ci_high"
MAPE_E2E_CI_LOW_PCT = "mape_e2e_pct_ci_low"
MAPE_E2E_CI_HIGH_PCT = "mape_e2e_pct_ci_high"
MAPE_MEAN_BATCH_CI_LOW_PCT = "mape_mean_batch_pct_ci_low"
MAPE_MEAN_BATCH_CI_HIGH_PCT = "mape_mean_batch_pct_ci_high"
CI_RESAMPLED = "ci_resampled"          # "curves" (whole --max-num-seqs sweeps) or "runs within curves"
CI_N_UNITS = "ci_n_units"              # number of curves, or of runs, resampled
CI_NOTE = "ci_note"                    # why an interval is zero-width or missing ("" if neither)

MAPE_INTERVAL_COLUMNS = (
    SETTING, PREDICTOR, MAPE_THROUGHPUT_CI_LOW_PCT, MAPE_THROUGHPUT_CI_HIGH_PCT, MAPE_E2E_CI_LOW_PCT,
    MAPE_E2E_CI_HIGH_PCT, MAPE_MEAN_BATCH_CI_LOW_PCT, MAPE_MEAN_BATCH_CI_HIGH_PCT, CI_RESAMPLED, CI_N_UNITS, CI_NOTE,
)
"""Columns of the MAPE interval table, in order."""
MAPE_CI_TABLE_ORDER = (
    SETTING, PREDICTOR, N_VALIDATION, MAPE_THROUGHPUT_PCT, MAPE_THROUGHPUT_CI_LOW_PCT, MAPE_THROUGHPUT_CI_HIGH_PCT,
    MAPE_E2E_PCT, MAPE_E2E_CI_LOW_PCT, MAPE_E2E_CI_HIGH_PCT, MAPE_MEAN_BATCH_PCT, MAPE_MEAN_BATCH_CI_LOW_PCT,
    MAPE_MEAN_BATCH_CI_HIGH_PCT, CI_RESAMPLED, CI_N_UNITS, CI_NOTE,
)
"""The first columns of `table3.csv`: each MAPE with its interval beside it (identifiability follows)."""

# --- Paired comparisons (results/<dataset>/mape_comparisons.csv): one row per setting,
# ordered pair of predictors and metric; the difference is MAPE(predictor) - MAPE(other).
OTHER_PREDICTOR = "other_predictor"
METRIC = "metric"                      # PredictionMetric.name: throughput, e2e, mean_batch
MAPE_DIFFERENCE_PCT = "mape_difference_pct_points"
MAPE_DIFFERENCE_CI_LOW = "mape_difference_pct_points_ci_low"
MAPE_DIFFERENCE_CI_HIGH = "mape_difference_pct_points_ci_high"
VERDICT = "verdict"                    # better (interval below 0), worse (above) or undecided

MAPE_COMPARISON_COLUMNS = (
    SETTING, PREDICTOR, OTHER_PREDICTOR, METRIC, MAPE_DIFFERENCE_PCT, MAPE_DIFFERENCE_CI_LOW,
    MAPE_DIFFERENCE_CI_HIGH, VERDICT, CI_RESAMPLED, CI_N_UNITS,
)
"""Columns of `mape_comparisons.csv`, in order."""

# --- The average-MAPE-reduction headline (results/<dataset>/mape_reduction.csv), one row.
MAPE_REDUCTION_PCT = "average_mape_reduction_pct"
MAPE_REDUCTION_CI_LOW = "average_mape_reduction_pct_ci_low"
MAPE_REDUCTION_CI_HIGH = "average_mape_reduction_pct_ci_high"
N_SETTINGS = "n_settings"
CONFIDENCE_LEVEL = "confidence_level"
CI_METHOD = "ci_method"                # scipy.stats.bootstrap method
CI_N_RESAMPLES = "ci_n_resamples"
CI_SEED = "ci_seed"

MAPE_REDUCTION_COLUMNS = (
    MAPE_REDUCTION_PCT, MAPE_REDUCTION_CI_LOW, MAPE_REDUCTION_CI_HIGH, N_SETTINGS, CONFIDENCE_LEVEL, CI_METHOD,
    CI_N_RESAMPLES, CI_SEED, CI_NOTE,
)
"""Columns of `mape_reduction.csv`, in order."""

# --- What the training data decide: one row per (setting, predictor)
# (results/<dataset>/evaluation/<setting>_identifiability.parquet, merged into table3.csv).
VALIDATION_DETERMINED = "validation_determined"  # every equally good fit predicts the validation rows alike
UNIDENTIFIED = "unidentified"                    # what the fit leaves open, in words ("identified" if nothing)
N_EQUIVALENT_SOLUTIONS = "n_equivalent_solutions"  # sampled training-equivalent SLIM fits (0: none needed)
MAPE_THROUGHPUT_LOW_PCT = "mape_throughput_pct_equivalent_low"   # range over the training-equivalent fits
MAPE_THROUGHPUT_HIGH_PCT = "mape_throughput_pct_equivalent_high"
MAPE_E2E_LOW_PCT = "mape_e2e_pct_equivalent_low"
MAPE_E2E_HIGH_PCT = "mape_e2e_pct_equivalent_high"
MAPE_MEAN_BATCH_LOW_PCT = "mape_mean_batch_pct_equivalent_low"
MAPE_MEAN_BATCH_HIGH_PCT = "mape_mean_batch_pct_equivalent_high"

IDENTIFIABILITY_COLUMNS = (
    SETTING, PREDICTOR, VALIDATION_DETERMINED, UNIDENTIFIED, N_EQUIVALENT_SOLUTIONS,
    MAPE_THROUGHPUT_LOW_PCT, MAPE_THROUGHPUT_HIGH_PCT, MAPE_E2E_LOW_PCT, MAPE_E2E_HIGH_PCT,
    MAPE_MEAN_BATCH_LOW_PCT, MAPE_MEAN_BATCH_HIGH_PCT,
)
"""Columns of a held-out identifiability table, in order; `table3.csv` is the MAPE table
joined with it on (setting, predictor)."""


# --- SIM's calibrated constants, one row per held-out setting (results/<dataset>/sim_constants.csv).
TRAIN_MAPE_THROUGHPUT_PCT = "train_mape_throughput_pct"
GEMM_COMPUTE_EFFICIENCY = "gemm_compute_efficiency"
GEMM_MEMORY_EFFICIENCY = "gemm_memory_efficiency"
ATTENTION_MEMORY_EFFICIENCY = "attention_memory_efficiency"
KERNEL_LATENCY_S = "kernel_latency_s"
STEP_OVERHEAD_BASE_S = "step_overhead_base_s"
STEP_OVERHEAD_PER_SEQ_S = "step_overhead_per_seq_s"
XFORMERS_ATTENTION_LATENCY_S = "xformers_attention_latency_s"
TENSOR_PARALLEL_STEP_OVERHEAD_S = "tensor_parallel_step_overhead_s"
SIM_FITTED_CONSTANTS = (GEMM_COMPUTE_EFFICIENCY, GEMM_MEMORY_EFFICIENCY, ATTENTION_MEMORY_EFFICIENCY,
                        KERNEL_LATENCY_S, STEP_OVERHEAD_BASE_S, STEP_OVERHEAD_PER_SEQ_S,
                        XFORMERS_ATTENTION_LATENCY_S, TENSOR_PARALLEL_STEP_OVERHEAD_S)
"""The simulator's fitted constants (`slim.sim.constants.FITTED_CONSTANTS`), SI units."""
SIM_CONSTANTS_COLUMNS = (SETTING, N_RUNS, *SIM_FITTED_CONSTANTS, TRAIN_MAPE_THROUGHPUT_PCT, UNIDENTIFIED)
"""Columns of `sim_constants.csv`, in order."""


# --- The baselines' readings (results/<dataset>/baseline_sensitivity.csv): one row per
# (variant, setting, metric), and one headline row per variant
# (its setting: slim.paper.baseline_sensitivity.HEADLINE_SETTING).
BASELINE = "baseline"                  # IMAI OOD-LR or LLMVisor-Agg
VARIANT = "variant"                    # baselines.variants.BaselineVariant.name
MAIN_VARIANT = "main"                  # True for the reading Tables III-IV use
VARIANT_DESCRIPTION = "description"
SETTING_LABEL = "setting_label"
VALUE_PCT = "value_pct"                # a MAPE (%), or the average MAPE reduction (%) on headline rows
VALUE_CI_LOW_PCT = "value_pct_ci_low"
VALUE_CI_HIGH_PCT = "value_pct_ci_high"
PAPER_VALUE_PCT = "paper_pct"          # the paper's value (Table III or Section VI-F), NaN where none
PAPER_INSIDE_CI = "paper_inside_ci"    # the paper's value lies in [ci_low, ci_high], bounds at its precision
PAPER_DISTANCE_PCT = "distance_to_paper_pct_points"   # |value - paper|

BASELINE_SENSITIVITY_COLUMNS = (
    BASELINE, VARIANT, MAIN_VARIANT, SETTING, SETTING_LABEL, METRIC, VALUE_PCT, VALUE_CI_LOW_PCT,
    VALUE_CI_HIGH_PCT, PAPER_VALUE_PCT, PAPER_INSIDE_CI, PAPER_DISTANCE_PCT, VALIDATION_DETERMINED,
    VARIANT_DESCRIPTION,
)
"""Columns of `baseline_sensitivity.csv`, in order."""


@dataclass(frozen=True)
class PredictionMetric:
    """One predicted quantity: its measured and predicted columns, the column of its MAPE,
    the columns of that MAPE's range over the training-equivalent fits, and those of its
    bootstrap confidence interval."""

    name: str
    measured: str
    predicted: str
    mape: str
    mape_low: str
    mape_high: str
    mape_ci_low: str
    mape_ci_high: str
    band_low: str = ""     # columns of the prediction band ("" where the metric has none)
    band_high: str = ""
    conformal_low: str = ""  # columns of the conformal interval and of its coverage ("" where none)
    conformal_high: str = ""
    coverage: str = ""


THROUGHPUT_METRIC = PredictionMetric("throughput", MEASURED_THROUGHPUT, PREDICTED_THROUGHPUT, MAPE_THROUGHPUT_PCT,
                                     MAPE_THROUGHPUT_LOW_PCT, MAPE_THROUGHPUT_HIGH_PCT, MAPE_THROUGHPUT_CI_LOW_PCT,
                                     MAPE_THROUGHPUT_CI_HIGH_PCT, PREDICTED_THROUGHPUT_LOW, PREDICTED_THROUGHPUT_HIGH,
                                     PREDICTED_THROUGHPUT_CONFORMAL_LOW, PREDICTED_THROUGHPUT_CONFORMAL_HIGH,
                                     COVERAGE_THROUGHPUT_PCT)
E2E_METRIC = PredictionMetric("e2e", MEASURED_E2E_S, PREDICTED_E2E_S, MAPE_E2E_PCT, MAPE_E2E_LOW_PCT,
                              MAPE_E2E_HIGH_PCT, MAPE_E2E_CI_LOW_PCT, MAPE_E2E_CI_HIGH_PCT, PREDICTED_E2E_LOW_S,
                              PREDICTED_E2E_HIGH_S, PREDICTED_E2E_CONFORMAL_LOW_S, PREDICTED_E2E_CONFORMAL_HIGH_S,
                              COVERAGE_E2E_PCT)
PREDICTION_METRICS = (THROUGHPUT_METRIC, E2E_METRIC)
"""Total-token throughput (Eq. 6) and E2E latency (Eq. 5), in the order the tables show them."""
MEAN_BATCH_METRIC = PredictionMetric("mean_batch", MEAN_BATCH_SIZE, PREDICTED_MEAN_BATCH_SIZE, MAPE_MEAN_BATCH_PCT,
                                     MAPE_MEAN_BATCH_LOW_PCT, MAPE_MEAN_BATCH_HIGH_PCT, MAPE_MEAN_BATCH_CI_LOW_PCT,
                                     MAPE_MEAN_BATCH_CI_HIGH_PCT)
"""The mean running batch, predicted only by predictors that do not take it as an input (SIM)."""
MAPE_METRICS = (*PREDICTION_METRICS, MEAN_BATCH_METRIC)
"""Every metric a MAPE table holds; the mean batch's MAPE is NaN for predictors given it."""

# --- Fig. 11 (results/generalisation/): one row per target run, and per target model.
GENERALISATION_PREDICTION_COLUMNS = (
    RUN_ID, MODEL, TENSOR_PARALLEL, INPUT_LEN_MEAN, OUTPUT_LEN_MEAN, OUTPUT_LEN_NOMINAL, MAX_NUM_SEQS,
    MEAN_BATCH_SIZE, MEASURED_THROUGHPUT, PREDICTED_THROUGHPUT, MEASURED_E2E_S, PREDICTED_E2E_S,
)
"""Columns of `fig11_predictions.csv`, in order."""
GENERALISATION_MAPE_COLUMNS = (MODEL, TENSOR_PARALLEL, N_RUNS, MAPE_THROUGHPUT_PCT, MAPE_E2E_PCT)
"""Columns of Fig. 11's per-model MAPE table, in order."""


def require_columns(frame, required: Iterable[str], table: str, error: type[SlimError] = ConfigError,
                    fix: str = "") -> None:
    """Raise `error` naming every column of `required` that `frame` (a DataFrame) lacks.

    The message reads ``"<table> lacks column(s) a, b"``, then ``"; <fix>"`` when `fix` is given.
    """
    missing = [name for name in required if name not in frame.columns]
    if missing:
        raise error(f"{table} lacks column(s) {', '.join(missing)}" + (f"; {fix}" if fix else ""))
