"""The test tiers hold: a test outside the `integration` tier cannot start a subprocess, and a test
that requests the real traces is in the `traces` tier (tests/conftest.py)."""

import subprocess
import sys

import pytest


def test_a_subprocess_outside_the_integration_tier_fails_naming_the_mark():
    with pytest.raises(pytest.fail.Exception, match="not marked integration"):
        subprocess.run([sys.executable, "-c", "pass"])


@pytest.mark.integration
def test_an_integration_test_may_start_one():
    assert subprocess.run([sys.executable, "-c", "pass"]).returncode == 0


def test_requesting_the_real_traces_marks_a_test_traces(request, shared_traces_dir):
    assert request.node.get_closest_marker("traces") is not None
