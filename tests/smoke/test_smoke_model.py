"""The embedded tiny model: built offline, deterministically, atomically; its digest is layout-independent."""

from __future__ import annotations

import hashlib
import json
import struct

import pytest

from envkit.jobs.smoke.model import (
    MODEL_FILES,
    TinySpec,
    build_tiny_model,
    ensure_tiny_model,
    model_digest,
    recipe_digest,
    tensor_values,
    write_safetensors,
)

np = pytest.importorskip("numpy")
pytest.importorskip("tokenizers")


def _files(path):
    return {f: hashlib.sha256((path / f).read_bytes()).hexdigest() for f in MODEL_FILES}


def test_two_builds_are_byte_identical(tiny_model, tmp_path):
    other = tmp_path / "again"
    other.mkdir()
    build_tiny_model(other)
    assert _files(other) == _files(tiny_model)
    assert model_digest(other) == model_digest(tiny_model)


def test_weights_depend_on_the_name_only():
    a = tensor_values("model.layers.0.mlp.up_proj.weight", (4, 3))
    assert np.array_equal(a, tensor_values("model.layers.0.mlp.up_proj.weight", (4, 3)))
    assert not np.array_equal(a, tensor_values("model.layers.1.mlp.up_proj.weight", (4, 3)))
    assert np.array_equal(tensor_values("model.norm.weight", (5,)), np.ones(5, dtype=np.float32))
    assert a.dtype == np.float32 and 0.02 < float(a.std()) < 0.2


def test_config_is_readable_by_4x_and_5x(tiny_model):
    cfg = json.loads((tiny_model / "config.json").read_text())
    assert cfg["model_type"] == "qwen2" and cfg["tie_word_embeddings"] is False
    assert cfg["rope_theta"] == cfg["rope_parameters"]["rope_theta"]  # both spellings
    assert cfg["vocab_size"] % 64 == 0
    tok_cfg = json.loads((tiny_model / "tokenizer_config.json").read_text())
    assert tok_cfg["tokenizer_class"] == "Qwen2Tokenizer" and "extra_special_tokens" not in tok_cfg


def test_cache_dir_is_reused_and_a_broken_one_replaced(tmp_path):
    root = tmp_path / "models"
    first = ensure_tiny_model(root=root)
    assert first.name == f"tiny-qwen2-{recipe_digest()[:16]}"
    stamp = (first / "model.safetensors").stat().st_mtime_ns
    assert ensure_tiny_model(root=root) == first
    assert (first / "model.safetensors").stat().st_mtime_ns == stamp  # not rebuilt
    (first / "tokenizer.json").unlink()  # a damaged cache entry
    again = ensure_tiny_model(root=root)
    assert again == first and (again / "tokenizer.json").is_file()
    assert [p.name for p in root.iterdir()] == [first.name]  # no temporary directory left behind


def test_recipe_digest_follows_the_spec():
    assert recipe_digest(TinySpec()) == recipe_digest(TinySpec())
    assert recipe_digest(TinySpec(num_hidden_layers=3)) != recipe_digest(TinySpec())


def test_model_digest_ignores_header_layout_but_not_values(tiny_model, tmp_path):
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(tiny_model / "model.safetensors"))
    relaid = tmp_path / "relaid"
    relaid.mkdir()
    (relaid / "config.json").write_text((tiny_model / "config.json").read_text())
    # the safetensors library lays the file out its own way, with other metadata
    save_file(dict(reversed(list(tensors.items()))), str(relaid / "model.safetensors"), metadata={"format": "pt", "x": "y"})
    assert (relaid / "model.safetensors").read_bytes() != (tiny_model / "model.safetensors").read_bytes()
    assert model_digest(relaid) == model_digest(tiny_model)
    # a volatile config key does not count, a real one does
    cfg = json.loads((tiny_model / "config.json").read_text())
    (relaid / "config.json").write_text(json.dumps({**cfg, "transformers_version": "9.9.9"}))
    assert model_digest(relaid) == model_digest(tiny_model)
    (relaid / "config.json").write_text(json.dumps({**cfg, "rope_theta": 5.0}))
    assert model_digest(relaid) != model_digest(tiny_model)
    (relaid / "config.json").write_text((tiny_model / "config.json").read_text())
    tensors["lm_head.weight"][0, 0] += 1e-3
    save_file(tensors, str(relaid / "model.safetensors"))
    assert model_digest(relaid) != model_digest(tiny_model)


def test_write_safetensors_is_readable_and_deterministic(tmp_path):
    from safetensors import safe_open

    arrays = {"b": np.arange(6, dtype=np.int64).reshape(2, 3), "a": np.linspace(0, 1, 5, dtype=np.float32)}
    write_safetensors(tmp_path / "x.safetensors", arrays, {"k2": "v", "k1": "w"})
    write_safetensors(tmp_path / "y.safetensors", dict(reversed(list(arrays.items()))), {"k1": "w", "k2": "v"})
    assert (tmp_path / "x.safetensors").read_bytes() == (tmp_path / "y.safetensors").read_bytes()
    with safe_open(str(tmp_path / "x.safetensors"), framework="numpy") as fh:
        assert fh.metadata() == {"k1": "w", "k2": "v"}
        assert np.array_equal(fh.get_tensor("b"), arrays["b"]) and np.array_equal(fh.get_tensor("a"), arrays["a"])
    (n,) = struct.unpack("<Q", (tmp_path / "x.safetensors").read_bytes()[:8])
    assert n % 8 == 0


@pytest.mark.torch
def test_tokenizer_ids_equal_the_raw_tokenizer_and_round_trip(tiny_model):
    pytest.importorskip("transformers")
    from tokenizers import Tokenizer
    from transformers import AutoTokenizer

    from envkit.jobs.smoke.prompts import BATCH, DIGITS, EN, FA

    raw = Tokenizer.from_file(str(tiny_model / "tokenizer.json"))
    tok = AutoTokenizer.from_pretrained(tiny_model, local_files_only=True)
    for text in [FA, EN, DIGITS, *BATCH, "12345", "unseen wörds\n\nand ٧٨٩", "<|im_start|>hi<|im_end|>"]:
        ids = tok(text)["input_ids"]
        assert ids == raw.encode(text).ids
        assert tok.decode(ids) == text
    assert len(tok("12345")["input_ids"]) == 5  # Qwen2's pre-tokenizer splits digits
    assert tok.pad_token_id == tok.eos_token_id == raw.token_to_id("<|endoftext|>")
