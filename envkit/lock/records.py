"""The lock as plain frozen records: what `envkit.core.derive` derives from a resolution, `envkit resolve` writes and
`envkit.lock.read` reads.

Each record has its model's name, fields (in the model's order: the lock's YAML keeps it), defaults and
`dump_drop_none` (`envkit.records.build`, from the table tools/matrix_records.py derives from the models:
envkit/models/tables.py); importing this module loads no pydantic. The pydantic `envkit.models.lock.Lock` holds every
lock that is read (and a test holds every derived lock to it). The type checker sees each record as its model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.models import methods, tables
from envkit.records import build

if TYPE_CHECKING:
    from envkit.models.lock import *  # noqa: F403
    from envkit.models.stack import FullStack as FullStack
else:
    globals().update(build(tables.LOCK, vars(methods), __name__))
