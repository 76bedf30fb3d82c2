"""The catalog entry that serves a model at a weight precision (slim/specs/served_precision.py): the
checkpoint's own format, the checkpoint with vLLM's --quantization, or its quantised release."""

from __future__ import annotations

import pytest

from slim.specs.served_precision import ServedEntry, precision_of_label, served_entry, weight_precision


@pytest.mark.parametrize("model, precision, entry", [
    ("Qwen/Qwen3-32B", "16-bit", "qwen3-32b"),
    ("Qwen/Qwen3-32B", "fp8", "qwen3-32b-fp8"),        # the catalog's quantised release of the checkpoint
    ("meta-llama/Llama-3.1-70B", "fp8", "llama-3.1-70b-fp8"),   # the checkpoint with --quantization fp8
    ("meta-llama/Llama-3.1-70B", "16-bit", "llama-3.1-70b"),
    ("openai/gpt-oss-120b", "fp4", "gpt-oss-120b"),    # the checkpoint's own MXFP4 experts
    ("MiniMaxAI/MiniMax-M2.5", "fp8", "minimax-m2.5"),
])
def test_the_entry_serving_a_model_at_a_precision(catalog, model, precision, entry):
    served = served_entry(catalog, model, precision)
    assert isinstance(served, ServedEntry) and served.name == entry
    assert weight_precision(catalog.architecture(entry)) == precision


def test_a_combination_the_catalog_lacks_says_so(catalog):
    assert "no entry of the models file serves Qwen3-32B (qwen3-32b) at fp4" in served_entry(
        catalog, "Qwen/Qwen3-32B", "fp4")
    # Llama-3.3-70B has Llama-3.1-70B's shapes, but llama-3.1-70b-fp8 serves another checkpoint.
    assert isinstance(served_entry(catalog, "meta-llama/Llama-3.3-70B-Instruct", "fp8"), str)
    assert served_entry(catalog, "acme/Falcon-9B", "16-bit") == "model 'acme/Falcon-9B' is not in the models file"


@pytest.mark.parametrize("label, precision", [("", "16-bit"), ("bf16", "16-bit"), ("fp8", "fp8"), ("FP8", "fp8"),
                                              ("fp4", "fp4"), ("nvfp4", "fp4"), ("mxfp4", "fp4"), ("int4_wo", None)])
def test_precision_labels(label, precision):
    assert precision_of_label(label) == precision
