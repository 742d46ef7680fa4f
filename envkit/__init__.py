"""envkit: reproducible, offline-installable, provably working Ascend NPU PyTorch stacks."""

__version__ = "0.1.0"
