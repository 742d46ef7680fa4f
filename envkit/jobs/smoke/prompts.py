"""The fixed prompts of the smoke test (their texts and how the long one is cut are part of the prompt digest)."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass

PROMPT_SET_VERSION = 1

FA = "امروز هوا آفتابی است و ما یک مدل کوچک را روی دستگاه آزمایش می‌کنیم تا مطمئن شویم نتیجه‌ها درست هستند."
EN = "The quick brown fox checks whether the device, the kernels and the cache agree on every single token."
DIGITS = "On 2024-11-30 at 09:45:07 the value was 3.14159 (±0.001); ۱۴۰۳/۰۹/۱۰ = 10 آذر, ١٢٣٤ + 5678 = 6912, 1,234,567.89"
BATCH = ["Hi!", "امروز هوا آفتابی است.", "The train left the station at 07:45 on 2024-03-20."]

MAX_LONG_TOKENS = 4096
LONG_MARGIN = 8


@dataclass(frozen=True)
class Prompt:
    name: str
    texts: tuple[str, ...]
    cut_tokens: int | None = None  # the long prompt: ids cut to exactly this many tokens

    @property
    def batch(self) -> int:
        return len(self.texts)


def long_length(max_positions: int | None) -> int:
    """Near the model's context, capped so that a real model's long prompt stays affordable."""
    ctx = max_positions or 1024
    return max(16, min(ctx, MAX_LONG_TOKENS) - LONG_MARGIN)


def prompt_set(max_positions: int | None, corpus: str) -> list[Prompt]:
    n = long_length(max_positions)
    # roughly 2.5 chars per token in the corpus; repeat generously, then cut the ids
    repeats = max(1, (n * 4) // max(1, len(corpus)) + 1)
    return [
        Prompt("fa", (FA,)),
        Prompt("en", (EN,)),
        Prompt("digits", (DIGITS,)),
        Prompt("long", (corpus * repeats,), cut_tokens=n),
        Prompt("batch", tuple(BATCH)),
    ]


def prompt_digest(prompts: list[Prompt]) -> str:
    doc = {
        "version": PROMPT_SET_VERSION,
        "prompts": [{"name": p.name, "texts": list(p.texts), "cut_tokens": p.cut_tokens} for p in prompts],
    }
    return "sha256:" + hashlib.sha256(json.dumps(doc, sort_keys=True, ensure_ascii=False).encode()).hexdigest()
