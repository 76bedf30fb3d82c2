"""The exact command lines of `slim tune`: each proposed benchmark (``vllm bench serve`` against one
server, or ``vllm bench latency``), the values a ``--run`` template may use, and the ``vllm serve``
command of a settled decision with the memory flags that reserve only its KV cache.

Online, every candidate cap is a client ``--max-concurrency`` against one server started with
``--max-num-seqs`` at the largest candidate, so no restart is needed; the result records the
server's cap in ``--metadata`` and ingest reads the run's cap as the smaller of the two. The
client's concurrency is what caps the running batch, and it is also what makes TTFT and E2EL
measurable (`slim.specs.slo`). Offline, a cap is the batch of ``vllm bench latency``. Each result is
written into its own folder under the results folder, named by the tool.
"""

from __future__ import annotations

import re

import pandas as pd

from slim import columns as col
from slim.gpu.kv_memory import KvMemoryPlan, plan_kv_memory
from slim.specs.slo import Slos
from slim.tune.plan import TunePlan
from slim.tune.proposals import Proposal
from slim.tune.request import ONLINE, TuneRequest, WorkloadSpec, prompts_at


def run_folder_name(spec: WorkloadSpec, cap: int, mode: str) -> str:
    """The folder one proposed benchmark writes into, named by the tool only."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.model)
    kind = "concurrency" if mode == ONLINE else "bs"
    return f"{model}_in{spec.input_len}_out{spec.output_len}_{kind}{cap}"


def placeholders(request: TuneRequest, spec: WorkloadSpec, cap: int, repeat: int = 0,
                 tensor_parallel: int | None = None) -> dict[str, str]:
    """Every value a benchmark command or a `--run` template may use: all chosen by the tool. A
    `repeat` > 0 (the cap's usable runs so far) names a folder of its own, ``..._run<repeat + 1>``;
    across layouts each tensor-parallel size (`tensor_parallel`; None: the request's) has folders of
    its own, ``..._tp<size>``, and an offline result file names its size as vLLM's do."""
    size = request.tensor_parallel if tensor_parallel is None else int(tensor_parallel)
    layout = f"_tp{size}" if request.across_layouts else ""
    folder = request.results_folder / (run_folder_name(spec, cap, request.mode) + layout
                                       + (f"_run{repeat + 1}" if repeat > 0 else ""))
    result_file = ("result.json" if request.mode == ONLINE
                   else f"latency_{re.sub(r'[^A-Za-z0-9._-]+', '_', spec.model)}_bs{cap}_in{spec.input_len}"
                        f"_out{spec.output_len}{layout}.json")
    return {"model": spec.model, "input_len": str(spec.input_len), "output_len": str(spec.output_len),
            "max_concurrency": str(cap), "batch_size": str(cap), "cap": str(cap),
            "server_max_num_seqs": str(max(request.candidate_caps)), "num_prompts": str(prompts_at(request, spec, cap)),
            "tensor_parallel_size": str(size), "tensor_parallel": str(size), "result_dir": str(folder),
            "result_filename": result_file, "result_file": str(folder / result_file)}


def serving_flags(request: TuneRequest) -> list[str]:
    """vLLM's ``--quantization`` and ``--kv-cache-dtype`` as the request gives them (none where not given)."""
    flags = ["--quantization", request.quantization] if request.quantization is not None else []
    return flags + (["--kv-cache-dtype", request.kv_cache_dtype] if request.kv_cache_dtype is not None else [])


def server_command(request: TuneRequest, spec: WorkloadSpec, tensor_parallel: int | None = None) -> list[str]:
    """The one server the online candidates of a layout share: its cap at the largest candidate."""
    size = request.tensor_parallel if tensor_parallel is None else int(tensor_parallel)
    return ["vllm", "serve", spec.model, "--max-num-seqs", str(max(request.candidate_caps)),
            "--tensor-parallel-size", str(size), *serving_flags(request)]


VLLM_DEFAULT_PERCENTILE_METRICS = ("ttft", "tpot", "itl")
VLLM_DEFAULT_METRIC_PERCENTILES = (99.0,)
"""What ``vllm bench serve`` reports without ``--percentile-metrics`` and ``--metric-percentiles``."""


def slo_benchmark_options(slos: Slos) -> list[str]:
    """The ``vllm bench serve`` options that make it record what the SLOs name: E2EL and percentiles
    beyond its defaults, and for a goodput objective its ``--goodput`` with each request's latencies
    (``--save-detailed``)."""
    quantities = {m.quantity for m in slos.metrics if not m.in_batch}
    percentiles = {m.percentile for m in slos.metrics if m.percentile is not None}
    options = []
    if (not quantities <= set(VLLM_DEFAULT_PERCENTILE_METRICS)
            or not percentiles <= set(VLLM_DEFAULT_METRIC_PERCENTILES)):
        options += ["--percentile-metrics", "ttft,tpot,itl,e2el", "--metric-percentiles",
                    ",".join(f"{p:g}" for p in sorted(percentiles | set(VLLM_DEFAULT_METRIC_PERCENTILES)))]
    if slos.goodput is not None:
        options += ["--goodput", *slos.goodput.spec.split(), "--save-detailed"]
    return options


def benchmark_command(request: TuneRequest, spec: WorkloadSpec, cap: int, repeat: int = 0,
                      tensor_parallel: int | None = None) -> list[str]:
    """The exact benchmark of one candidate (its `repeat`-th further run, at `tensor_parallel`; None:
    the request's), as an argument list."""
    values = placeholders(request, spec, cap, repeat, tensor_parallel)
    if request.mode == ONLINE:
        return ["vllm", "bench", "serve", "--model", spec.model, "--dataset-name", "random",
                "--random-input-len", values["input_len"], "--random-output-len", values["output_len"],
                "--ignore-eos", "--num-prompts", values["num_prompts"], "--request-rate", "inf",
                "--max-concurrency", values["max_concurrency"], *slo_benchmark_options(request.slos),
                "--save-result", "--result-dir", values["result_dir"],
                "--result-filename", values["result_filename"], "--metadata",
                f"max_num_seqs={values['server_max_num_seqs']}",
                f"tensor_parallel_size={values['tensor_parallel_size']}"]
    return ["vllm", "bench", "latency", "--model", spec.model, "--input-len", values["input_len"],
            "--output-len", values["output_len"], "--batch-size", values["batch_size"],
            "--tensor-parallel-size", values["tensor_parallel"], "--output-json", values["result_file"]]


def concurrency_sweep_note(request: TuneRequest) -> str:
    """What the online benchmarks measure, in one line: one server, the cap set by the client."""
    top = max(request.candidate_caps)
    return (f"one server at --max-num-seqs {top} (the largest candidate) for every benchmark: a benchmark's "
            f"--max-concurrency C keeps at most C requests in flight, so the running batch is at most C, the cap it "
            f"measures; --metadata max_num_seqs={top} records the server's cap and ingest reads the run's cap as the "
            "smaller of the two")


def memory_plan(plan: TunePlan, workload_label: str, cap: float) -> KvMemoryPlan | None:
    """The KV memory a cap needs and the flags that reserve only it (`slim.gpu.kv_memory`), for the
    workload's model at its lengths, on the request's accelerator; None where no prior describes the
    model (`TunePlan.no_prior`: its KV bytes per token are not known)."""
    spec = plan.specs[workload_label]
    if plan.model_of(workload_label) in plan.no_prior:
        return None
    arch = plan.catalog[spec.model]
    size = plan.tensor_parallel_of(workload_label)
    runs = plan.measured_runs
    of_model = (runs[(runs[col.MODEL] == arch.name) & (runs[col.TENSOR_PARALLEL].fillna(1).astype(int) == size)]
                if len(runs) else None)
    blocks = (of_model[col.NUM_GPU_BLOCKS].dropna() if of_model is not None and col.NUM_GPU_BLOCKS in of_model
              else pd.Series(dtype=float))
    return plan_kv_memory(arch, plan.hardware, cap, spec.input_len, spec.output_len,
                          num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                          max_model_len=spec.input_len + spec.output_len, tensor_parallel=size)


def serve_command(plan: TunePlan, workload_label: str, cap: float) -> list[str]:
    """``vllm serve`` at the chosen cap with the memory flags that reserve only its KV cache; without
    them (vLLM's defaults) where its size is not known (`memory_plan` None)."""
    spec = plan.specs[workload_label]
    memory = memory_plan(plan, workload_label, cap)
    flags = [] if memory is None else ["--gpu-memory-utilization", f"{memory.gpu_memory_utilization_needed:.3f}",
                                       "--num-gpu-blocks-override", str(memory.num_gpu_blocks_override)]
    return ["vllm", "serve", spec.model, "--max-num-seqs", f"{int(cap)}", "--max-model-len",
            str(spec.input_len + spec.output_len), *flags,
            "--tensor-parallel-size", str(plan.tensor_parallel_of(workload_label)), *serving_flags(plan.request)]


def proposal_commands(plan: TunePlan, proposal: Proposal) -> dict[str, list[str]]:
    spec = plan.specs[proposal.workload]
    cap = int(proposal.max_num_seqs)
    size = plan.tensor_parallel_of(proposal.workload)
    commands = {"benchmark": benchmark_command(plan.request, spec, cap, plan.session.runs_of(proposal.candidate),
                                               size)}
    if plan.request.mode == ONLINE:
        commands = {"server": server_command(plan.request, spec, size), **commands}
    return commands
