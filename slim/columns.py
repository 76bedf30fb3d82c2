"""Column names of the tables that flow through the pipeline.

`runs.parquet` (ingest) holds one row per run directory with every column below;
`clean.parquet` holds the rows whose status is ``ok``. Units are in the names.
"""

from __future__ import annotations

# Identity of a run.
DATASET = "dataset"
RUN_ID = "run_id"                      # run directory, relative to the trace root
TRACE_FORMAT = "trace_format"          # "benchmark_serving" (public layout) or "vllm_bench_serve"
MODEL = "model"                        # canonical name from config/models.yaml (raw name if unknown)
MAX_NUM_SEQS = "max_num_seqs"          # server flag --max-num-seqs
TENSOR_PARALLEL = "tensor_parallel"    # server flag --tensor-parallel-size (GPUs per model; 1 if unset)
NUM_PROMPTS = "num_prompts"

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
MEAN_TTFT_MS = "mean_ttft_ms"
MEAN_TPOT_MS = "mean_tpot_ms"
MEAN_ITL_MS = "mean_itl_ms"
MEAN_E2EL_MS = "mean_e2el_ms"          # client's E2E (includes queueing); NaN in the old format

# Server side (metrics CSV / server log / cache config).
MEAN_BATCH_SIZE = "mean_batch_size"    # mean num_requests_running over the active benchmark window
BATCH_SIZE_SOURCE = "batch_size_source"  # "metrics_csv" or "server_log"
MAX_KV_CACHE_USAGE = "max_kv_cache_usage"  # 0..1
NUM_PREEMPTIONS = "num_preemptions"
NUM_GPU_BLOCKS = "num_gpu_blocks"
BLOCK_SIZE = "block_size"
KV_CAPACITY_TOKENS = "kv_capacity_tokens"  # num_gpu_blocks x block_size

# Derived.
E2E_LATENCY_S = "e2e_latency_s"        # Little's law: mean_batch_size / request_throughput

# Accounting.
STATUS = "status"
REASON_DETAIL = "reason_detail"

WORKLOAD_KEYS = (MODEL, INPUT_LEN_NOMINAL, OUTPUT_LEN_NOMINAL)
"""A measured curve: all runs sharing these keys, indexed by max_num_seqs."""
