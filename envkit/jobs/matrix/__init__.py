"""`envkit matrix check | show | refresh | schema`: the shipped matrix checked, its sections read, (`refresh`) the
Python-package rules from PyPI written into the matrix files in place, and the JSON Schemas of every file envkit reads
(`schema`); `chip_devices` answers the matrix query of `envkit image run-args --chip`.

The command line only parses and formats (`envkit.cli.matrix`): these functions return data.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.core.matrix import Problem
    from envkit.export.container import ChipDevices

# The sections `envkit matrix check` counts, in the order of its summary, and those whose rows it counts per confidence.
COUNTED = ("chips", "operating_systems", "hdk", "cann", "torch_npu", "torch_npu_lines", "rules", "artifacts")
SOURCED = ("chips", "operating_systems", "hdk", "cann", "torch_npu", "torch_npu_lines", "rules")


@dataclass(frozen=True)
class MatrixCheck:
    """What `envkit matrix check` found: the matrix's digest, the rows per section and per confidence, the problems."""

    digest: str
    counts: dict[str, int]  # section -> rows, in the order of COUNTED
    confidence: dict[str, int]  # stated / derived / inferred -> rows of the SOURCED sections
    problems: list[Problem]

    def to_dict(self) -> dict[str, Any]:
        """The `--json` document."""
        return {
            "ok": not self.problems,
            "digest": self.digest,
            "counts": self.counts,
            "confidence": self.confidence,
            "problems": [p.__dict__ for p in self.problems],
        }


def check() -> MatrixCheck:
    """The shipped matrix checked (`envkit.core.matrix.check_matrix`: references resolve, no duplicates, sections
    sorted, every row sourced), with its rows counted."""
    from envkit.core.matrix import check_matrix, load_matrix

    lm = load_matrix()
    problems = check_matrix(lm)
    m = lm.model
    confidence: dict[str, int] = {}
    for section in SOURCED:
        for row in getattr(m, section):
            confidence[row.confidence] = confidence.get(row.confidence, 0) + 1
    return MatrixCheck(lm.digest, {s: len(getattr(m, s)) for s in COUNTED}, confidence, problems)


def section_rows(section: str) -> list[Any]:
    """The rows of one section of the shipped matrix (`chips`, `cann`, ...), as records."""
    from envkit.core.matrix import load_matrix

    return list(getattr(load_matrix().model, section))


def section_data(section: str) -> list[Any]:
    """The rows of one section of the shipped matrix as plain data (`envkit matrix show --json`)."""
    from envkit.records import asdict

    return [asdict(r) for r in section_rows(section)]


def chip_devices(chip: str) -> ChipDevices:
    """The device facts of `chip` from its row of the shipped matrix; BadInput, naming the known chips, for a chip
    the matrix does not know."""
    from envkit.core.matrix import load_matrix
    from envkit.errors import BadInput
    from envkit.export.container import chip_from_row

    lm = load_matrix()
    row = lm.chips.get(chip)
    if row is None:
        raise BadInput(f"unknown chip {chip!r}", hint="Known chips: " + ", ".join(lm.chips))
    return chip_from_row(row)


def matrix_schema() -> dict[str, Any]:
    """The JSON Schema of the matrix files (`envkit matrix schema` without -o)."""
    from envkit.schemas import all_schemas

    return dict(all_schemas()["matrix"])


def write_schemas(out: Path) -> list[Path]:
    """The matrix, stack, lock, report and smoke-report schemas written into the folder `out`; the paths written."""
    from envkit.schemas import write_schemas as write

    return list(write(out))
