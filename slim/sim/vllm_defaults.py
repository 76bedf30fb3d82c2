"""vLLM's scheduler defaults per release: which engine a plain ``vllm serve`` runs (V0 or V1), its
token budget (``max_num_batched_tokens``), its ``max_num_seqs`` and whether it schedules
asynchronously, as vLLM's own source sets them when the flags are left unset. The simulator reads
them through `constants_for_vllm_version` to run a run's schedule under the scheduler its server
had (`slim.sim.engine.simulate_run`).

Every value below was read in the released wheels' source (``vllm-<version>-*.whl`` on PyPI), at
the file and line given; "serve" is vLLM's ``UsageContext.OPENAI_API_SERVER``, "llm" its
``LLM_CLASS`` (the offline ``LLM`` class, `vllm bench latency` / `throughput`).

=============  ======  ==========================================  ==================  =========
versions       engine  token budget (serve / llm)                  max_num_seqs        async
=============  ======  ==========================================  ==================  =========
<= 0.6.4       V0      512 with chunked prefill (1)                256 (2)             no
0.6.5 - 0.7.3  V0      2048 with chunked prefill (3)               256 (4)             no
0.8.0 - 0.8.4  V1      8192 / 16384 if the device name has "h100"  1024 (6)            no
                       or "h200", else 2048 / 8192 (5)
0.8.5          V1      8192 / 16384 if >= 70 GiB, else 2048 / 8192 1024 if >= 70 GiB,  no
                       (7)                                         else 256 (7)
0.9.0 - 0.10.0 V1      as 0.8.5, but an A100 (80 GB) takes the     as 0.8.5 (8)        no
                       small values (8)
0.10.1 - 0.11  V1      as 0.9.0                                    min(default,        no
                                                                   budget) (9)
0.12 - 0.13    V1      min(default, max_num_seqs x max_model_len)  as 0.10.1           no
                       (10)
0.14 - 0.18    V1      as 0.12                                     as 0.10.1           yes (11)
=============  ======  ==========================================  ==================  =========

(1) 0.6.3 ``vllm/config.py:983`` and 0.6.4 ``vllm/config.py:1114`` (``SchedulerConfig``):
    ``max_num_batched_tokens = 512`` when chunked prefill is on and unset ("the best balance
    between ITL and TTFT on A100"); the public traces' V0 server logs print this value.
(2) 0.6.3 ``vllm/engine/arg_utils.py:115``: ``max_num_seqs: int = 256``.
(3) 0.6.5 ``vllm/config.py:1344`` and 0.7.3 ``vllm/config.py:1532``: ``max_num_batched_tokens = 2048``.
(4) 0.6.6 ``arg_utils.py:213`` and 0.7.3 ``arg_utils.py:224``: 256 unless ``VLLM_USE_V1``, which
    ``vllm/envs.py`` defaults to "0" in 0.7.3 (line 504) and to "1" from 0.8.0 on (0.8.0 line 523).
(5) 0.8.0 ``arg_utils.py:1693-1704``, 0.8.2 ``:1793``, 0.8.3 ``:1647``, 0.8.4 ``:1669``
    (``_set_default_args_v1``): ``"h100" in device_name or "h200" in device_name``.
(6) 0.8.0 ``arg_utils.py:1715``: ``default_max_num_seqs = 1024``, whatever the device.
(7) 0.8.5 ``arg_utils.py:1596-1609``: ``device_memory >= 70 * GiB_bytes`` (the device's total
    memory) selects 8192 / 16384 tokens and 1024 sequences, else 2048 / 8192 and 256.
(8) 0.9.0 ``arg_utils.py:1495``, 0.10.0 ``:1584``, 0.11.0 ``:1605``, 0.18.0 ``:2008``:
    ``device_memory >= 70 * GiB_bytes and "a100" not in device_name`` (vLLM PR 17885: large
    budgets lowered the A100's throughput); from 0.10.0 the sequences are per usage context,
    1024 / 1024 and 256 / 256 (0.10.0 ``:1590-1602``).
(9) 0.10.1 ``arg_utils.py:1711``, 0.11.0 ``:1678``: ``max_num_seqs = min(default_max_num_seqs,
    max_num_batched_tokens)`` when ``--max-num-seqs`` is unset.
(10) 0.12.0 ``arg_utils.py:2003-2006``, 0.18.0 ``:2182-2185``
    (``_set_default_max_num_seqs_and_batched_tokens_args``): an unset budget becomes
    ``min(max_num_seqs x max_model_len, default)``, with ``max_num_seqs`` the flag's value where
    it is set. 0.17.0 ``:2128`` and 0.18.0 ``:2162`` double both defaults under
    ``--performance-mode throughput``; the default mode is "balanced" (0.18.0
    ``vllm/config/vllm.py:320``), which leaves them.
(11) 0.14.0 ``vllm/config/scheduler.py:133`` ``async_scheduling = Field(default=None)`` (0.13.0
    ``:133``: ``False``), resolved to True by ``vllm/config/vllm.py:588-628`` unless pipeline
    parallelism, a non-EAGLE speculative method or an executor other than ``mp``/``uni`` is in use;
    0.18.0 ``vllm/config/vllm.py:718-752`` likewise. The engine then keeps two steps in flight
    (``max_concurrent_batches`` 2, 0.14.0 ``vllm/v1/executor/multiproc_executor.py:413-416``).

Every V1 release 0.8.5-0.18.0 leaves ``long_prefill_token_threshold`` at 0 and
``max_num_partial_prefills`` at 1 (0.11.0 ``vllm/config/scheduler.py:49,59``; 0.18.0 ``:69,79``),
so a plain ``vllm serve`` chunks only to the budget. Versions after 0.18 take 0.18's row, the
newest read; versions before 0.6.3 take 0.6.3's.

A release before 0.6.5 runs the scheduler `SimConstants` describe by default (V0, 512 tokens), the
one the constants were calibrated on, so `constants_for_vllm_version` leaves the constants as they
are for it and `scheduler_release` names it "" like an unknown version: a schedule is simulated once
per scheduler, not once per version string.
"""

from __future__ import annotations

import re
from dataclasses import replace
from typing import NamedTuple

from slim.errors import ConfigError
from slim.sim.constants import SimConstants
from slim.specs.hardware import GIB, Hardware

USAGES = ("serve", "llm")
"""vLLM's usage contexts: ``serve`` (``vllm serve``, OPENAI_API_SERVER), ``llm`` (the ``LLM`` class)."""

LARGE_DEVICE_BYTES = 70 * GIB
"""vLLM's threshold for the large defaults, ``70 * GiB_bytes`` of total device memory (note 7)."""

_VERSION = re.compile(r"^\s*v?(\d+)\.(\d+)(?:\.(\d+))?")


class SchedulerDefaults(NamedTuple):
    """What a vLLM release runs when the scheduler flags are left unset."""

    engine: str                   # "v0" or "v1"
    max_num_batched_tokens: int   # the token budget of one step
    max_num_seqs: int             # the flag's value where given, else vLLM's default
    async_scheduling: bool        # V1 schedules step n+1 before step n's output is processed


def parse_vllm_version(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a vLLM version string ("0.11.0", "v0.10.1.1", "0.12.0rc1",
    "0.11.1.dev5+g1234"); a missing patch counts as 0."""
    match = _VERSION.match(str(version))
    if match is None:
        raise ConfigError(f"vLLM version '{version}' is not of the form MAJOR.MINOR[.PATCH]; give the version "
                          "the server printed (vllm --version)")
    major, minor, patch = match.groups()
    return int(major), int(minor), int(patch or 0)


SCHEDULER_RELEASES = ((0, 6, 5), (0, 8, 0), (0, 8, 5), (0, 9, 0), (0, 10, 1), (0, 12, 0), (0, 14, 0))
"""The first release of each row of the table after the first: releases between two of them share
their scheduler rules and defaults."""


def is_vllm_version(version: str) -> bool:
    """Whether `parse_vllm_version` reads `version`."""
    return _VERSION.match(str(version)) is not None


def scheduler_release(version: str | None) -> str:
    """The first release whose scheduler `version` runs ("0.12.0" for "0.13.1"), or "" for an unknown
    version and for a release before 0.6.5, which runs the constants' own V0 scheduler."""
    if version is None or not str(version).strip():
        return ""
    release = parse_vllm_version(str(version))
    first = max((row for row in SCHEDULER_RELEASES if row <= release), default=None)
    return "" if first is None else ".".join(map(str, first))


def vllm_scheduler_defaults(version: str, gpu_memory_bytes: float, usage: str = "serve", *, device_name: str = "",
                            max_num_seqs: int | None = None, max_model_len: int | None = None) -> SchedulerDefaults:
    """The engine, token budget, ``max_num_seqs`` and async scheduling of vLLM `version` on a CUDA
    device of `gpu_memory_bytes` total memory named `device_name` (as torch names it, e.g.
    "NVIDIA H100 80GB HBM3"; only "h100", "h200" and "a100" in it matter), for `usage` ("serve" or
    "llm"), with ``--max-num-seqs`` `max_num_seqs` (None: unset) and the server's `max_model_len`
    (needed from 0.12 on, where the budget is capped at ``max_num_seqs x max_model_len``; None: no
    cap). The table and its sources are in the module docstring. V0 values assume
    ``--enable-chunked-prefill``, the only V0 mode the simulator runs."""
    if usage not in USAGES:
        raise ConfigError(f"usage '{usage}' is not one of {', '.join(USAGES)}")
    release = parse_vllm_version(version)
    if release < (0, 8, 0):
        budget = 512 if release < (0, 6, 5) else 2048
        return SchedulerDefaults("v0", budget, max_num_seqs or 256, False)
    name = device_name.lower()
    if release < (0, 8, 5):
        large_budget = "h100" in name or "h200" in name
        large_seqs = True
    else:
        large_budget = gpu_memory_bytes >= LARGE_DEVICE_BYTES and (release < (0, 9, 0) or "a100" not in name)
        large_seqs = large_budget
    budget = {"serve": 8192, "llm": 16384}[usage] if large_budget else {"serve": 2048, "llm": 8192}[usage]
    default_seqs = 1024 if large_seqs else 256
    seqs = max_num_seqs if max_num_seqs is not None else default_seqs
    if release >= (0, 12, 0) and max_model_len is not None:
        budget = min(seqs * max_model_len, budget)
    if max_num_seqs is None and release >= (0, 10, 1):
        seqs = min(seqs, budget)
    return SchedulerDefaults("v1", budget, seqs, release >= (0, 14, 0))


def constants_for_vllm_version(consts: SimConstants, version: str | None, hw: Hardware, max_num_seqs: int,
                               max_model_len: int | None = None) -> SimConstants:
    """`consts` with the scheduler a server of vLLM `version` on `hw` runs at ``--max-num-seqs``
    `max_num_seqs` (`vllm_scheduler_defaults` with the device's nominal memory and its display name
    or key, usage "serve"); unchanged where `version` is None or empty (today's constants). The memory
    profile follows the budget, since vLLM's profile run is one step of ``max_num_batched_tokens``
    tokens in both engines. A release before 0.6.5 leaves them too (`scheduler_release`)."""
    if not scheduler_release(version):
        return consts
    defaults = vllm_scheduler_defaults(str(version), hw.memory_bytes, "serve",
                                       device_name=f"{hw.display_name} {hw.name}", max_num_seqs=max_num_seqs,
                                       max_model_len=max_model_len or consts.default_max_model_len)
    return replace(consts, scheduler_engine=defaults.engine, max_num_batched_tokens=defaults.max_num_batched_tokens,
                   async_scheduling=defaults.async_scheduling)
