"""`envkit image run-args`: a request -> a chip's or a lock's container facts (`envkit.export.container`) -> the
runtime options (`envkit.export.runargs.RunArgs`), which the command line prints as flags, JSON or compose.

A job reads no matrix: a chip named without a lock (`--chip`, a matrix query) is looked up through the request's
`chips`, which the caller supplies (the command line: `envkit.cli.chip_devices`), as it supplies the lock check.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from envkit.errors import BadInput
from envkit.lock.gate import SCHEMA_ONLY, LockCheck

if TYPE_CHECKING:
    from envkit.export.container import ChipDevices
    from envkit.export.runargs import RunArgs

# A chip id -> its device facts from the matrix row (BadInput for a chip the matrix does not know).
ChipLookup = Callable[[str], "ChipDevices"]


@dataclass(frozen=True)
class RunArgsRequest:
    """What `envkit image run-args` was asked for: exactly one of a chip and a lock, and the NPUs."""

    chip: str | None = None  # its facts from the matrix, through `chips`
    lock: Path | None = None  # its facts from the lock, read through `lock_check`
    devices: str | None = None  # NPU ids as --devices takes them, e.g. 0-7 or 0,2 (None: every NPU of the chip)
    chips: ChipLookup | None = None  # the matrix's chip lookup (needed for `chip`)
    lock_check: LockCheck = SCHEMA_ONLY  # what the lock is held to after its schema (the CLI: the matrix's gate)


def run_args(req: RunArgsRequest) -> RunArgs:
    """The container runtime options of the request's chip or lock: BadInput unless exactly one is given, for a chip
    its lookup refuses, or for devices the chip does not have."""
    from envkit.export.container import container_facts, device_facts
    from envkit.export.runargs import from_facts

    if (req.chip is None) == (req.lock is None):
        raise BadInput("give exactly one of --chip and --lock", hint="e.g. envkit image run-args --chip 910b")
    if req.chip is not None:
        if req.chips is None:
            raise ValueError("RunArgsRequest.chip needs RunArgsRequest.chips, the matrix's chip lookup")
        return from_facts(device_facts(req.chips(req.chip), req.devices))
    from envkit.lock.file import read_lock

    assert req.lock is not None
    return from_facts(container_facts(read_lock(req.lock, req.lock_check), req.devices))
