"""The matrix as plain frozen records: what the resolver, the constraints and the lock derivation read.

Built from a validated matrix or loaded from the compiled matrix store (`envkit.core.matrix`); importing this module
loads no pydantic. Each record has its model's name, fields, defaults and methods (`envkit.records.build`, from the
table tools/matrix_records.py derives from the models: envkit/models/tables.py); `NESTED` is the table the store
loader follows to rebuild the nested records from plain JSON. The type checker sees each record as its model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.models import methods, tables
from envkit.records import build

if TYPE_CHECKING:
    from envkit.models.hccl import *  # noqa: F403
    from envkit.models.matrix import *  # noqa: F403
else:
    globals().update(build(tables.MATRIX, vars(methods), __name__))

# record -> its fields that hold records: (field, how: one | optional | list, record)
NESTED: dict[type, tuple[tuple[str, str, type], ...]] = {
    globals()[name]: tuple((field, how, globals()[sub]) for field, how, sub in rows) for name, rows in tables.NESTED.items()
}
# the envkit modules whose text decides what a validated matrix is (keys the compiled store)
MODEL_SOURCES: tuple[str, ...] = tables.MODEL_SOURCES
