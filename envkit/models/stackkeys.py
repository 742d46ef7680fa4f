"""The keys of a stack, as plain data (the resolver's side reads them without the pydantic stack model,
`envkit.models.stack`, which re-exports them)."""

from __future__ import annotations

STACK_KEYS: tuple[str, ...] = (
    "chip",
    "arch",
    "os",
    "python",
    "driver",
    "firmware",
    "cann",
    "torch",
    "torch_npu",
    "numpy",
    "transformers",
    "accelerate",
)

# Optional framework keys: a stack without them is a plain stack (its lock is unchanged); `envkit resolve
# --workload serving|serving-multi-node|training-mindspeed` completes them (matrices/serving.yaml); `ray` only for
# serving across nodes (vllm-ascend's Ray way).
FRAMEWORK_KEYS: tuple[str, ...] = ("vllm", "vllm_ascend", "triton_ascend", "mindspeed", "ray")
ALL_KEYS: tuple[str, ...] = STACK_KEYS + FRAMEWORK_KEYS


def pin_flag(key: str) -> str:
    """The option of `envkit resolve` that pins `key` (`--torch-npu` for torch_npu): what the command declares and
    what a lock's `generated_by` records."""
    return "--" + key.replace("_", "-")
