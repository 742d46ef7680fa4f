"""The one place envkit reads the calendar.

Outputs are deterministic, so a date appears only where a fact records when it was read (`matrix refresh`'s
sources). `today()` honours ``SOURCE_DATE_EPOCH`` (the reproducible-builds convention: seconds since the epoch,
UTC), so a build or a test can fix the date; without it, the system's UTC date.
"""

from __future__ import annotations

import datetime
import os

from envkit.errors import BadInput

# ASCII digits only (int() also takes "²", "٣" and "1_000"); 12 digits reach past the year 9999's seconds
_MAX_EPOCH_DIGITS = 12


def today() -> str:
    """Today's date, ISO 8601 (YYYY-MM-DD), UTC; ``SOURCE_DATE_EPOCH`` overrides it."""
    raw = os.environ.get("SOURCE_DATE_EPOCH")
    if raw is None or raw == "":
        return datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    if not (raw.isascii() and raw.isdigit() and len(raw) <= _MAX_EPOCH_DIGITS):
        raise BadInput(
            f"SOURCE_DATE_EPOCH={raw[:40]!r} is not a number of seconds since 1970-01-01 (ASCII digits, at most 12)",
            hint="Unset it, or set it to e.g. $(date -d 2026-11-30 +%s).",
        )
    try:
        return datetime.datetime.fromtimestamp(int(raw), datetime.timezone.utc).date().isoformat()
    except (OverflowError, OSError, ValueError):
        raise BadInput(f"SOURCE_DATE_EPOCH={raw} is past the dates Python can hold") from None
