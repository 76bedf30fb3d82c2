"""vLLM's scheduler defaults per release (`slim.sim.vllm_defaults`) against the values its released
source sets (the module docstring cites each file and line), and the constants they give a run."""

import pytest

from slim.errors import ConfigError
from slim.sim import SimConstants
from slim.sim.vllm_defaults import (
    SchedulerDefaults,
    constants_for_vllm_version,
    parse_vllm_version,
    scheduler_release,
    vllm_scheduler_defaults,
)
from slim.specs.hardware import GIB

H100_80 = 79.2 * GIB       # what torch reports for an H100 80 GB HBM3
H100_64 = 63.43 * GIB      # the public traces' H100 64 GB (its server logs)
A100_80 = 79.1 * GIB


@pytest.mark.parametrize("version, memory, name, expected", [
    # V0 with chunked prefill: 512 up to 0.6.4, 2048 from 0.6.5; 256 sequences.
    ("0.6.3", H100_80, "NVIDIA H100 80GB HBM3", ("v0", 512, 256, False)),
    ("0.6.4.post1", H100_80, "NVIDIA H100 80GB HBM3", ("v0", 512, 256, False)),
    ("0.6.5", H100_80, "NVIDIA H100 80GB HBM3", ("v0", 2048, 256, False)),
    ("0.7.3", H100_64, "NVIDIA H100 64GB HBM2e", ("v0", 2048, 256, False)),
    # 0.8.0-0.8.4: V1, the budget by device name, always 1024 sequences.
    ("0.8.0", H100_64, "NVIDIA H100 64GB HBM2e", ("v1", 8192, 1024, False)),
    ("0.8.4", A100_80, "NVIDIA A100-SXM4-80GB", ("v1", 2048, 1024, False)),
    # 0.8.5: by total memory (70 GiB), sequences too; an A100 80 GB counts as large.
    ("0.8.5", H100_64, "NVIDIA H100 64GB HBM2e", ("v1", 2048, 256, False)),
    ("0.8.5", A100_80, "NVIDIA A100-SXM4-80GB", ("v1", 8192, 1024, False)),
    # 0.9.0 on: an A100 takes the small values.
    ("0.9.0", A100_80, "NVIDIA A100-SXM4-80GB", ("v1", 2048, 256, False)),
    ("0.10.0", H100_80, "NVIDIA H100 80GB HBM3", ("v1", 8192, 1024, False)),
    ("0.11.0", H100_64, "NVIDIA H100 64GB HBM2e", ("v1", 2048, 256, False)),
    ("0.13.0", H100_80, "NVIDIA H100 80GB HBM3", ("v1", 8192, 1024, False)),
    # 0.14 on: async scheduling.
    ("0.14.0", H100_80, "NVIDIA H100 80GB HBM3", ("v1", 8192, 1024, True)),
    ("0.18.0", H100_64, "NVIDIA H100 64GB HBM2e", ("v1", 2048, 256, True)),
    ("v0.18.1rc0", H100_80, "NVIDIA H200", ("v1", 8192, 1024, True)),
])
def test_defaults_per_release(version, memory, name, expected):
    assert vllm_scheduler_defaults(version, memory, device_name=name) == SchedulerDefaults(*expected)


def test_llm_usage_and_the_flag_s_max_num_seqs():
    assert vllm_scheduler_defaults("0.11.0", H100_80, "llm").max_num_batched_tokens == 16384
    assert vllm_scheduler_defaults("0.11.0", H100_64, "llm").max_num_batched_tokens == 8192
    assert vllm_scheduler_defaults("0.11.0", H100_80, max_num_seqs=64).max_num_seqs == 64
    with pytest.raises(ConfigError, match="usage"):
        vllm_scheduler_defaults("0.11.0", H100_80, "bench")


def test_budget_capped_at_max_num_seqs_times_max_model_len_from_0_12():
    # 0.12.0 arg_utils.py:2003-2006: min(max_num_seqs x max_model_len, default) when the budget is unset.
    assert vllm_scheduler_defaults("0.12.0", H100_80, max_num_seqs=2, max_model_len=2048).max_num_batched_tokens == 4096
    assert vllm_scheduler_defaults("0.11.0", H100_80, max_num_seqs=2, max_model_len=2048).max_num_batched_tokens == 8192
    # 0.10.1 on, an unset max_num_seqs is at most the budget.
    capped = vllm_scheduler_defaults("0.12.0", H100_80, max_model_len=4)
    assert capped.max_num_batched_tokens == 4096 and capped.max_num_seqs == 1024
    assert vllm_scheduler_defaults("0.10.0", H100_80, max_model_len=4).max_num_seqs == 1024


def test_versions_are_parsed_or_refused():
    assert parse_vllm_version("0.10.1.1") == (0, 10, 1)
    assert parse_vllm_version("0.11.1.dev5+g1234") == (0, 11, 1)
    assert parse_vllm_version("0.12") == (0, 12, 0)
    with pytest.raises(ConfigError, match="vllm --version"):
        parse_vllm_version("latest")


def test_constants_for_a_version(h100):
    base = SimConstants()
    assert constants_for_vllm_version(base, None, h100, 64) is base
    assert constants_for_vllm_version(base, " ", h100, 64) is base
    v1 = constants_for_vllm_version(base, "0.14.0", h100, 64)
    assert (v1.scheduler_engine, v1.max_num_batched_tokens, v1.async_scheduling) == ("v1", 2048, True)
    assert v1.memory_profile.max_num_batched_tokens == 2048
    v0 = constants_for_vllm_version(base, "0.6.3", h100, 64)
    assert v0 == base


@pytest.mark.parametrize(("version", "release"), [
    ("", ""), ("0.5.2.dev1210+g6f078ea3c", ""), ("0.6.4", ""), ("0.6.5", "0.6.5"), ("0.7.3", "0.6.5"),
    ("0.8.4", "0.8.0"), ("0.8.5", "0.8.5"), ("0.10.0", "0.9.0"), ("0.11.2", "0.10.1"), ("0.13.0", "0.12.0"),
    ("0.18.0", "0.14.0"), ("1.2.0", "0.14.0")])
def test_scheduler_release_names_the_first_release_of_its_row(version, release):
    assert scheduler_release(version) == release


def test_releases_of_one_row_simulate_alike(h100):
    hw = h100
    for first, later in (("0.10.1", "0.11.2"), ("0.12.0", "0.13.0"), ("0.14.0", "0.18.0")):
        assert constants_for_vllm_version(SimConstants(), first, hw, 64, 4096) == \
            constants_for_vllm_version(SimConstants(), later, hw, 64, 4096)
    assert constants_for_vllm_version(SimConstants(), "0.5.2", hw, 64) == SimConstants()
