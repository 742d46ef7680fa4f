"""The validation report as plain frozen records: what `envkit validate` says of a valid stack or lock without
pydantic (`envkit.core.resolve.valid_report`); `envkit.lock.text.plain` dumps one exactly as `model_dump(mode="json")`
dumps the pydantic `envkit.models.report.ValidationReport`, which stays the report's schema. Built by
`envkit.records.build` from envkit/models/tables.py; the type checker sees each record as its model.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.models import methods, tables
from envkit.records import build

if TYPE_CHECKING:
    from envkit.models.report import *  # noqa: F403
else:
    globals().update(build(tables.REPORT, vars(methods), __name__))
