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
import shlex
from typing import Sequence

import pandas as pd

from slim import columns as col
from slim.decision.layouts import Layout
from slim.gpu.kv_memory import KvMemoryPlan, plan_kv_memory
from slim.specs.architecture import vllm_model_argument
from slim.specs.served_precision import precision_flags, serving_flags_of
from slim.specs.slo import Slos
from slim.tune.plan import TunePlan
from slim.tune.proposals import Proposal
from slim.tune.request import ONLINE, TuneRequest, WorkloadSpec, prompts_at
from slim.tune.server_sizes import data_parallel_sizes, tensor_parallel_sizes


def run_folder_name(spec: WorkloadSpec, cap: int, mode: str) -> str:
    """The folder one proposed benchmark writes into, named by the tool only."""
    model = re.sub(r"[^A-Za-z0-9._-]+", "_", spec.model)
    kind = "concurrency" if mode == ONLINE else "bs"
    return f"{model}_in{spec.input_len}_out{spec.output_len}_{kind}{cap}"


MULTI_ARGUMENT_PLACEHOLDERS = frozenset({"serving_flags"})
"""Placeholders whose value is several arguments: standing alone as a template word, each becomes an
argument of its own (none where empty)."""


def placeholders(request: TuneRequest, spec: WorkloadSpec, cap: int, repeat: int = 0,
                 layout: Layout | None = None, model_flags: Sequence[str] = (),
                 served_model: str | None = None) -> dict[str, str]:
    """Every value a benchmark command or a `--run` template may use: all chosen by the tool. A
    `repeat` > 0 (the cap's usable runs so far) names a folder of its own, ``..._run<repeat + 1>``;
    across layouts each layout (`layout`; None: the request's tensor-parallel size alone) has folders
    of its own, ``..._tp<t>`` or ``..._tp<t>_dp<d>``, and an offline result file names its size as
    vLLM's do. The cap and ``server_max_num_seqs`` are the server's requests in flight over all its
    data-parallel ranks; ``server_max_num_seqs_per_rank`` is vLLM's ``--max-num-seqs`` of each;
    ``expert_parallel_flag`` is ``--enable-expert-parallel`` at a layout whose runs spread the experts,
    else empty, and ``enable_expert_parallel`` is ``true`` or ``false`` for the result's metadata;
    ``serving_flags`` is `model_flags` (`serving_flags`: ``--quantization`` and ``--kv-cache-dtype`` as
    the model is served), several arguments (`MULTI_ARGUMENT_PLACEHOLDERS`); ``model`` is `served_model`
    (`served_model`: the name vLLM loads) where given, else the workload's model as named."""
    layout = layout if layout is not None else Layout.of_tensor_parallel(request.tensor_parallel)
    size = layout.tensor_parallel
    suffix = (f"_tp{size}" + (f"_dp{layout.ranks}" if layout.ranks > 1 else "")) if request.across_layouts else ""
    folder = request.results_folder / (run_folder_name(spec, cap, request.mode) + suffix
                                       + (f"_run{repeat + 1}" if repeat > 0 else ""))
    result_file = ("result.json" if request.mode == ONLINE
                   else f"latency_{re.sub(r'[^A-Za-z0-9._-]+', '_', spec.model)}_bs{cap}_in{spec.input_len}"
                        f"_out{spec.output_len}{suffix}.json")
    server_cap = max(request.candidate_caps)
    return {"model": served_model or spec.model, "input_len": str(spec.input_len), "output_len": str(spec.output_len),
            "max_concurrency": str(cap), "batch_size": str(cap), "cap": str(cap),
            "server_max_num_seqs": str(server_cap),
            "server_max_num_seqs_per_rank": str(layout.per_rank_cap(server_cap)),
            "num_prompts": str(prompts_at(request, spec, cap)),
            "tensor_parallel_size": str(size), "tensor_parallel": str(size),
            "data_parallel_size": str(layout.ranks),
            "expert_parallel_flag": "--enable-expert-parallel" if layout.expert_parallel else "",
            "enable_expert_parallel": "true" if layout.expert_parallel else "false",
            "serving_flags": shlex.join(model_flags),
            "result_dir": str(folder),
            "result_filename": result_file, "result_file": str(folder / result_file)}


def served_model(plan: TunePlan, workload_label: str) -> str:
    """The workload's model as ``vllm serve`` and ``vllm bench`` load it: as the user named it where
    vLLM can load that name, else its catalog entry's Hugging Face id (`vllm_model_argument`)."""
    return vllm_model_argument(plan.specs[workload_label].model, plan.architecture_of(workload_label))


def serving_flags(plan: TunePlan, workload_label: str) -> list[str]:
    """vLLM's ``--quantization`` and ``--kv-cache-dtype`` of the workload's model as the plan serves it:
    its catalog entry's (a ``base:`` form's quantization, the request's flags applied;
    `slim.specs.served_precision.serving_flags_of`), the request's own where no prior describes it."""
    arch = plan.architecture_of(workload_label)
    if arch is None:
        return precision_flags(plan.request.quantization, plan.request.kv_cache_dtype)
    return serving_flags_of(arch)


def server_command(plan: TunePlan, workload_label: str) -> list[str]:
    """The one server the online candidates of a workload's layout share: its cap at the largest
    candidate (each data-parallel rank's share of it, `Layout.per_rank_cap`), its context the workload's
    (``--max-model-len`` input + output: without it vLLM sizes for the model's whole context and refuses
    to start where one such sequence does not fit the KV cache)."""
    layout, spec = plan.layout_of(workload_label), plan.specs[workload_label]
    top = max(plan.request.candidate_caps)
    return ["vllm", "serve", served_model(plan, workload_label), "--max-num-seqs", str(layout.per_rank_cap(top)),
            "--max-model-len", str(spec.input_len + spec.output_len), *layout.parallel_flags(),
            *serving_flags(plan, workload_label)]


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
                      layout: Layout | None = None, model_flags: Sequence[str] = (),
                      model: str | None = None) -> list[str]:
    """The exact benchmark of one candidate (its `repeat`-th further run, at `layout`; None: the
    request's tensor-parallel size alone), as an argument list; across layouts its result records the
    layout's data-parallel size beside its tensor-parallel size, and at an expert-parallel layout that
    the server spread the experts. An offline benchmark loads the model itself, with `model_flags`
    (`serving_flags`: the ``--quantization`` and ``--kv-cache-dtype`` it is served with); `model` is the
    name it loads (`served_model`; None: the workload's model as named)."""
    values = placeholders(request, spec, cap, repeat, layout, served_model=model)
    recorded = ([f"data_parallel_size={values['data_parallel_size']}"] if request.across_layouts else [])
    recorded += ["enable_expert_parallel=true"] if layout is not None and layout.expert_parallel else []
    if request.mode == ONLINE:
        return ["vllm", "bench", "serve", "--model", values["model"], "--dataset-name", "random",
                "--random-input-len", values["input_len"], "--random-output-len", values["output_len"],
                "--ignore-eos", "--num-prompts", values["num_prompts"], "--request-rate", "inf",
                "--max-concurrency", values["max_concurrency"], *slo_benchmark_options(request.slos),
                "--save-result", "--result-dir", values["result_dir"],
                "--result-filename", values["result_filename"], "--metadata",
                f"max_num_seqs={values['server_max_num_seqs']}",
                f"tensor_parallel_size={values['tensor_parallel_size']}", *recorded]
    return ["vllm", "bench", "latency", "--model", values["model"], "--input-len", values["input_len"],
            "--output-len", values["output_len"], "--batch-size", values["batch_size"],
            "--tensor-parallel-size", values["tensor_parallel"], *model_flags, "--output-json", values["result_file"]]


def concurrency_sweep_note(request: TuneRequest) -> str:
    """What the online benchmarks measure, in one line: one server, the cap set by the client."""
    top = max(request.candidate_caps)
    ranks = f"; with data parallelism, {top} / d on each of its d ranks" if request.across_layouts else ""
    return (f"one server at --max-num-seqs {top} (the largest candidate{ranks}) for every benchmark: a benchmark's "
            f"--max-concurrency C keeps at most C requests in flight, so the running batch is at most C, the cap it "
            f"measures; --metadata max_num_seqs={top} records the server's cap and ingest reads the run's cap as the "
            "smaller of the two")


def memory_plan(plan: TunePlan, workload_label: str, cap: float) -> KvMemoryPlan | None:
    """The KV memory a cap needs and the flags that reserve only it (`slim.gpu.kv_memory`), for the
    workload's model at its lengths, on the request's accelerator; None where no prior describes the
    model (`TunePlan.no_prior`: its KV bytes per token are not known)."""
    spec, arch = plan.specs[workload_label], plan.architecture_of(workload_label)
    if arch is None:
        return None
    layout = plan.layout_of(workload_label)
    runs = plan.measured_runs
    of_model = (runs[((runs[col.MODEL] == arch.name) & (tensor_parallel_sizes(runs) == layout.tensor_parallel)
                      & (data_parallel_sizes(runs) == layout.ranks))] if len(runs) else None)
    blocks = (of_model[col.NUM_GPU_BLOCKS].dropna() if of_model is not None and col.NUM_GPU_BLOCKS in of_model
              else pd.Series(dtype=float))
    # Each data-parallel rank holds the KV cache of its own share of the requests in flight.
    return plan_kv_memory(arch, plan.hardware, layout.per_rank_cap(cap), spec.input_len, spec.output_len,
                          num_gpu_blocks=int(blocks.max()) if not blocks.empty else None,
                          max_model_len=spec.input_len + spec.output_len, tensor_parallel=layout.tensor_parallel)


def serve_command(plan: TunePlan, workload_label: str, cap: float) -> list[str]:
    """``vllm serve`` at the chosen cap (the server's requests in flight; vLLM's ``--max-num-seqs`` is
    each data-parallel rank's share, `Layout.per_rank_cap`) with the memory flags that reserve only its
    KV cache; without them (vLLM's defaults) where its size is not known (`memory_plan` None)."""
    spec = plan.specs[workload_label]
    layout = plan.layout_of(workload_label)
    memory = memory_plan(plan, workload_label, cap)
    flags = [] if memory is None else ["--gpu-memory-utilization", f"{memory.gpu_memory_utilization_needed:.3f}",
                                       "--num-gpu-blocks-override", str(memory.num_gpu_blocks_override)]
    return ["vllm", "serve", served_model(plan, workload_label), "--max-num-seqs", str(layout.per_rank_cap(cap)),
            "--max-model-len", str(spec.input_len + spec.output_len), *flags, *layout.parallel_flags(),
            *serving_flags(plan, workload_label)]


def proposal_commands(plan: TunePlan, proposal: Proposal) -> dict[str, list[str]]:
    spec = plan.specs[proposal.workload]
    cap = int(proposal.max_num_seqs)
    layout = plan.layout_of(proposal.workload)
    commands = {"benchmark": benchmark_command(plan.request, spec, cap, plan.session.runs_of(proposal.candidate),
                                               layout, serving_flags(plan, proposal.workload),
                                               served_model(plan, proposal.workload))}
    if plan.request.mode == ONLINE:
        commands = {"server": server_command(plan, proposal.workload), **commands}
    return commands
