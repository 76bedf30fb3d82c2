"""A Hugging Face config.json describes a model as the models file does (slim.specs.hf_config): the
public configs of five catalog models give their entries exactly, parameter count included, and a
config SLIM cannot model is refused naming the file and the key."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slim.errors import ConfigError
from slim.specs.architecture import load_architectures
from slim.specs.hf_config import architecture_from_hf_config

HF_CONFIGS = Path(__file__).resolve().parent / "data" / "hf_configs"
FIELDS = ("n_layers", "hidden_dim", "n_q_heads", "n_kv_heads", "ffn_dim", "ffn_kind", "n_params", "vocab_size",
          "embed_proj_dim")


@pytest.mark.parametrize("model", ["opt-350m", "opt-1.3b", "llama-2-7b", "mistral-7b", "qwen2.5-32b"])
def test_public_configs_give_the_catalog_entries_exactly(model):
    described = architecture_from_hf_config(HF_CONFIGS / model / "config.json", name=model)
    catalog = load_architectures()[model]
    assert {field: getattr(described, field) for field in FIELDS} == {field: getattr(catalog, field)
                                                                       for field in FIELDS}
    assert described.kv_bytes_per_token() == catalog.kv_bytes_per_token()


def test_the_name_defaults_to_the_configs_own_then_to_its_folder(tmp_path):
    assert architecture_from_hf_config(HF_CONFIGS / "llama-2-7b" / "config.json").name == "llama-2-7b-hf"
    assert architecture_from_hf_config(HF_CONFIGS / "mistral-7b" / "config.json").name == "mistral-7b"


def _write(tmp_path: Path, **changes) -> Path:
    raw = json.loads((HF_CONFIGS / "mistral-7b" / "config.json").read_text())
    for key, value in changes.items():
        if value is None:
            raw.pop(key)
        else:
            raw[key] = value
    path = tmp_path / "My-Model" / "config.json"
    path.parent.mkdir(exist_ok=True)
    path.write_text(json.dumps(raw))
    return path


def test_a_multimodal_config_is_read_from_its_text_config(tmp_path):
    text = json.loads((HF_CONFIGS / "mistral-7b" / "config.json").read_text())
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"model_type": "llava", "text_config": text, "vision_config": {"hidden_size": 1024}}))
    described = architecture_from_hf_config(path, "llava-mistral")
    assert (described.n_layers, described.n_kv_heads, described.n_params) == (32, 8, 7241732096)


def test_an_unknown_family_is_read_as_a_llama_style_decoder(tmp_path):
    described = architecture_from_hf_config(_write(tmp_path, model_type="newfamily"))
    assert described.name == "my-model" and described.ffn_kind == "swiglu" and described.n_params == 7241732096
    assert architecture_from_hf_config(_write(tmp_path, model_type="x", hidden_act="gelu")).ffn_kind == "two_matrix"


def test_without_num_key_value_heads_every_head_has_its_own_kv(tmp_path):
    assert architecture_from_hf_config(_write(tmp_path, num_key_value_heads=None)).n_kv_heads == 32


@pytest.mark.parametrize("changes, message", [
    ({"hidden_size": None}, "'hidden_size' is missing"),
    ({"num_hidden_layers": "32"}, "'num_hidden_layers' is '32', not a positive integer"),
    ({"num_local_experts": 8}, "num_local_experts = 8 but no experts per token"),
    ({"quantization_config": {"quant_method": "hqq"}}, "quant_method 'hqq' is not modelled; known: fp8"),
    ({"torch_dtype": "int8"}, "torch_dtype 'int8'"),
    ({"head_dim": "256"}, "'head_dim' is '256', not a positive integer"),
    ({"num_attention_heads": 30}, "not a multiple of num_attention_heads"),
])
def test_configs_slim_cannot_model_are_refused_naming_the_key(tmp_path, changes, message):
    with pytest.raises(ConfigError, match=message) as error:
        architecture_from_hf_config(_write(tmp_path, **changes))
    assert "config.json" in str(error.value)


def test_a_file_that_is_not_a_json_object_is_refused(tmp_path):
    (tmp_path / "config.json").write_text("[1, 2]")
    with pytest.raises(ConfigError, match="expected a JSON object"):
        architecture_from_hf_config(tmp_path / "config.json")
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ConfigError, match="not a readable JSON model config"):
        architecture_from_hf_config(tmp_path / "config.json")


def test_the_served_name_of_a_config_is_what_vllm_can_load(tmp_path, monkeypatch):
    # A config alone: the Hugging Face id it records; a folder holding weights: the folder itself (a
    # local fine-tune records the model it came from); a recorded local path or nothing: the folder,
    # always absolute, so a run folder named after it is never a hidden '.' folder.
    from slim.specs.hf_config import served_model_of_config

    folder = tmp_path / "ckpt"
    folder.mkdir()
    config = folder / "config.json"
    for recorded, served in (("acme/opt-custom", "acme/opt-custom"), ("", str(folder)),
                             ("/home/someone/checkpoint-500", str(folder)), ("../ckpt", str(folder))):
        config.write_text(json.dumps({"_name_or_path": recorded}))
        assert served_model_of_config(config) == served
    monkeypatch.chdir(folder)
    assert served_model_of_config("config.json") == str(folder)
    config.write_text(json.dumps({"_name_or_path": "acme/opt-custom"}))
    (folder / "model.safetensors").write_bytes(b"")
    assert served_model_of_config(config) == str(folder) == served_model_of_config(folder)


def test_a_folder_with_a_config_and_no_weights_is_named_as_one_vllm_cannot_load(tmp_path):
    from slim.specs.hf_config import folder_without_weights

    folder = tmp_path / "model"
    folder.mkdir()
    assert folder_without_weights(str(folder)) is None                 # no config.json: not a checkpoint
    (folder / "config.json").write_text("{}")
    assert "holds a config.json but no weights" in folder_without_weights(str(folder))
    (folder / "model.safetensors").write_text("")
    assert folder_without_weights(str(folder)) is None
    assert folder_without_weights("facebook/opt-2.7b") is None
