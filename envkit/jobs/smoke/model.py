"""The embedded smoke model: a tiny Qwen2 causal LM and its byte-level BPE tokenizer, built locally.

Nothing is downloaded. The build is deterministic and independent of the installed Transformers:
- the tokenizer is trained with the `tokenizers` library on the bundled `data/corpus.txt` (English and
  Persian), using exactly Qwen2's pre-tokenizer pipeline, so that Transformers 4.x and 5.x (which
  rebuild `Qwen2Tokenizer` from vocab and merges) produce the same ids as the raw tokenizer;
- each weight tensor is drawn from numpy's legacy `RandomState` (a stream numpy guarantees stable),
  seeded from the tensor's *name*, so the weights do not depend on any library's init order;
- every file (config.json, tokenizer_config.json, generation_config.json, model.safetensors) is
  written by this module, not by `save_pretrained`, so both Transformers 4.4x-4.5x and 5.x read them.

The result lives in `<cache>/envkit/models/tiny-qwen2-<recipe digest>`; it is built in a temporary
directory next to it and renamed into place, so a half-built model is never visible.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import struct
import tempfile
import zlib
from dataclasses import asdict, dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from envkit.models.smokerun import write_safetensors  # the model's files and the run's logits: one writer

RECIPE_VERSION = 1
SEED = 1234
WEIGHT_STD = 0.08  # large enough that greedy decoding does not repeat one token (a weak cache test)

# Qwen2's pre-tokenizer regex (transformers' Qwen2Tokenizer PRETOKENIZE_REGEX).
QWEN2_PRETOKENIZE_REGEX = (
    r"""(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"""
)
EOS = "<|endoftext|>"
SPECIAL_TOKENS = [EOS, "<|im_start|>", "<|im_end|>"]

MODEL_FILES = (
    "config.json",
    "generation_config.json",
    "model.safetensors",
    "tokenizer.json",
    "tokenizer_config.json",
    "special_tokens_map.json",
)


@dataclass(frozen=True)
class TinySpec:
    """The architecture of the embedded model."""

    hidden_size: int = 64
    intermediate_size: int = 128
    num_hidden_layers: int = 4
    num_attention_heads: int = 4
    num_key_value_heads: int = 2
    max_position_embeddings: int = 512
    rope_theta: float = 10000.0
    rms_norm_eps: float = 1e-6
    tokenizer_vocab_target: int = 2000
    vocab_multiple: int = 64


def corpus_text() -> str:
    return resources.files("envkit.jobs.smoke").joinpath("data/corpus.txt").read_text(encoding="utf-8")


def recipe_digest(spec: TinySpec = TinySpec()) -> str:
    """A digest of everything the build depends on: recipe version, seed, architecture and corpus."""
    h = hashlib.sha256()
    h.update(
        json.dumps({"recipe": RECIPE_VERSION, "seed": SEED, "std": WEIGHT_STD, "spec": asdict(spec)}, sort_keys=True).encode()
    )
    h.update(b"\0")
    h.update(corpus_text().encode("utf-8"))
    return h.hexdigest()


def cache_root() -> Path:
    """`$ENVKIT_CACHE_DIR`, else `$XDG_CACHE_HOME/envkit`, else `~/.cache/envkit`."""
    if os.environ.get("ENVKIT_CACHE_DIR"):
        return Path(os.environ["ENVKIT_CACHE_DIR"])
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "envkit"


def default_model_dir(spec: TinySpec = TinySpec()) -> Path:
    return cache_root() / "models" / f"tiny-qwen2-{recipe_digest(spec)[:16]}"


def ensure_tiny_model(spec: TinySpec = TinySpec(), root: Path | None = None) -> Path:
    """Return the directory of the embedded model, building it first if needed (atomically)."""
    target = (root / f"tiny-qwen2-{recipe_digest(spec)[:16]}") if root else default_model_dir(spec)
    if _complete(target, spec):
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".tmp-tiny-qwen2-", dir=target.parent))
    try:
        build_tiny_model(tmp, spec)
        try:
            os.rename(tmp, target)
        except OSError:
            # Another process won the race (target exists and is non-empty), or a stale broken
            # directory is in the way: keep a complete one, replace a broken one.
            if _complete(target, spec):
                return target
            shutil.rmtree(target, ignore_errors=True)
            os.rename(tmp, target)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    return target


def _complete(path: Path, spec: TinySpec) -> bool:
    marker = path / "envkit-build.json"
    if not marker.is_file():
        return False
    try:
        data = json.loads(marker.read_text())
    except (OSError, ValueError):
        return False
    return data.get("recipe_digest") == recipe_digest(spec) and all((path / f).is_file() for f in MODEL_FILES)


# --- tokenizer ---------------------------------------------------------------------------------


def build_tokenizer(spec: TinySpec = TinySpec()):  # -> tokenizers.Tokenizer
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_PRETOKENIZE_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False),
        ]
    )
    tok.post_processor = processors.ByteLevel(add_prefix_space=False, trim_offsets=False, use_regex=False)
    tok.decoder = decoders.ByteLevel()  # it takes no options (tokenizers ignored the ones given: same tokenizer.json)
    trainer = trainers.BpeTrainer(
        vocab_size=spec.tokenizer_vocab_target,
        min_frequency=1,
        special_tokens=list(SPECIAL_TOKENS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    lines = corpus_text().splitlines(keepends=True)
    tok.train_from_iterator(lines, trainer=trainer, length=len(lines))
    return tok


# --- weights -----------------------------------------------------------------------------------


def tensor_shapes(spec: TinySpec, vocab: int) -> dict[str, tuple[int, ...]]:
    """Names and shapes of Qwen2ForCausalLM's parameters (untied embeddings)."""
    h, i = spec.hidden_size, spec.intermediate_size
    head = h // spec.num_attention_heads
    kv = spec.num_key_value_heads * head
    shapes: dict[str, tuple[int, ...]] = {
        "model.embed_tokens.weight": (vocab, h),
        "model.norm.weight": (h,),
        "lm_head.weight": (vocab, h),
    }
    for n in range(spec.num_hidden_layers):
        p = f"model.layers.{n}."
        shapes.update(
            {
                p + "input_layernorm.weight": (h,),
                p + "post_attention_layernorm.weight": (h,),
                p + "self_attn.q_proj.weight": (h, h),
                p + "self_attn.q_proj.bias": (h,),
                p + "self_attn.k_proj.weight": (kv, h),
                p + "self_attn.k_proj.bias": (kv,),
                p + "self_attn.v_proj.weight": (kv, h),
                p + "self_attn.v_proj.bias": (kv,),
                p + "self_attn.o_proj.weight": (h, h),
                p + "mlp.gate_proj.weight": (i, h),
                p + "mlp.up_proj.weight": (i, h),
                p + "mlp.down_proj.weight": (h, i),
            }
        )
    return dict(sorted(shapes.items()))


def tensor_values(name: str, shape: tuple[int, ...]):  # -> numpy.ndarray (float32)
    """The value of one weight, a function of its name and shape only."""
    import numpy as np

    if name.endswith("norm.weight"):
        return np.ones(shape, dtype=np.float32)
    seed = zlib.crc32(f"{SEED}:{name}".encode()) & 0xFFFFFFFF
    values = np.random.RandomState(seed).standard_normal(size=shape) * WEIGHT_STD
    return values.astype(np.float32)


# --- the whole build ---------------------------------------------------------------------------


def build_tiny_model(out: Path, spec: TinySpec = TinySpec()) -> None:
    """Write the tokenizer, config and weights of the embedded model into `out` (an existing dir)."""
    out = Path(out)
    tok = build_tokenizer(spec)
    tok_vocab = tok.get_vocab_size(with_added_tokens=True)
    vocab = -(-tok_vocab // spec.vocab_multiple) * spec.vocab_multiple
    eos_id = tok.token_to_id(EOS)
    tok.save(str(out / "tokenizer.json"), pretty=True)

    config = {
        "architectures": ["Qwen2ForCausalLM"],
        "model_type": "qwen2",
        "vocab_size": vocab,
        "hidden_size": spec.hidden_size,
        "intermediate_size": spec.intermediate_size,
        "num_hidden_layers": spec.num_hidden_layers,
        "num_attention_heads": spec.num_attention_heads,
        "num_key_value_heads": spec.num_key_value_heads,
        "hidden_act": "silu",
        "max_position_embeddings": spec.max_position_embeddings,
        "initializer_range": 0.02,
        "rms_norm_eps": spec.rms_norm_eps,
        "use_cache": True,
        "tie_word_embeddings": False,
        # both spellings: 4.x reads rope_theta, 5.x reads rope_parameters
        "rope_theta": spec.rope_theta,
        "rope_scaling": None,
        "rope_parameters": {"rope_type": "default", "rope_theta": spec.rope_theta},
        "use_sliding_window": False,
        "sliding_window": None,
        "max_window_layers": spec.num_hidden_layers,
        "attention_dropout": 0.0,
        "bos_token_id": eos_id,
        "eos_token_id": eos_id,
        "pad_token_id": eos_id,
        "torch_dtype": "float32",
        "dtype": "float32",
    }
    _write_json(out / "config.json", config)
    _write_json(out / "generation_config.json", {"bos_token_id": eos_id, "pad_token_id": eos_id, "do_sample": False})
    # Written by hand: what Transformers 5 writes ("TokenizersBackend", list-valued
    # extra_special_tokens) cannot be read by 4.5x.
    _write_json(
        out / "tokenizer_config.json",
        {
            "tokenizer_class": "Qwen2Tokenizer",
            "model_max_length": spec.max_position_embeddings,
            "bos_token": None,
            "eos_token": EOS,
            "pad_token": EOS,
            "unk_token": None,
            "additional_special_tokens": SPECIAL_TOKENS[1:],
            "padding_side": "left",
            "clean_up_tokenization_spaces": False,
            "add_prefix_space": False,
            "errors": "replace",
            "split_special_tokens": False,
        },
    )
    _write_json(
        out / "special_tokens_map.json",
        {"eos_token": EOS, "pad_token": EOS, "additional_special_tokens": SPECIAL_TOKENS[1:]},
    )
    tensors = {name: tensor_values(name, shape) for name, shape in tensor_shapes(spec, vocab).items()}  # float32
    write_safetensors(out / "model.safetensors", tensors, {"format": "pt"})
    _write_json(out / "envkit-build.json", {"recipe_digest": recipe_digest(spec), "recipe_version": RECIPE_VERSION})


def _write_json(path: Path, data: Any) -> None:
    path.write_text(json.dumps(data, indent=2, sort_keys=True, ensure_ascii=False) + "\n", encoding="utf-8")


# --- digests of any checkpoint -----------------------------------------------------------------

_VOLATILE_CONFIG_KEYS = {"transformers_version", "_name_or_path", "torch_dtype", "dtype", "_commit_hash"}


def model_digest(path: Path) -> str:
    """A digest of a checkpoint's weights (name, dtype, shape, bytes of every tensor) and its config.

    Independent of how the safetensors headers are laid out and of volatile config keys, so the same
    weights give the same digest whichever tool or Transformers version saved them. Streams; no torch.
    """
    path = Path(path)
    h = hashlib.sha256()
    config = path / "config.json"
    if config.is_file():
        data = {k: v for k, v in json.loads(config.read_text(encoding="utf-8")).items() if k not in _VOLATILE_CONFIG_KEYS}
        h.update(b"config\0" + json.dumps(data, sort_keys=True).encode() + b"\0")
    st_files = sorted(path.glob("*.safetensors"))
    if st_files:
        entries: list[tuple[str, Path, int, dict[str, Any]]] = []
        for f in st_files:
            with open(f, "rb") as fh:
                (n,) = struct.unpack("<Q", fh.read(8))
                header = json.loads(fh.read(n))
            for name, info in header.items():
                if name != "__metadata__":
                    entries.append((name, f, 8 + n, info))
        for name, f, base, info in sorted(entries, key=lambda e: e[0]):
            h.update(f"{name}\0{info['dtype']}\0{info['shape']}\0".encode())
            start, end = info["data_offsets"]
            with open(f, "rb") as fh:
                fh.seek(base + start)
                left = end - start
                while left > 0:
                    chunk = fh.read(min(left, 1 << 24))
                    if not chunk:
                        break
                    h.update(chunk)
                    left -= len(chunk)
    else:  # pytorch_model*.bin and the like: the bytes of the files
        for f in sorted(p for p in path.iterdir() if p.is_file() and p.suffix in {".bin", ".pt", ".pth"}):
            h.update(f.name.encode() + b"\0")
            with open(f, "rb") as fh:
                for chunk in iter(lambda: fh.read(1 << 24), b""):
                    h.update(chunk)
    return "sha256:" + h.hexdigest()
