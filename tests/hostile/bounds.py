"""What every property test of a parser of untrusted input asks: a value or a BadInput, within a time bound."""

from __future__ import annotations

import os
import time

from hypothesis import HealthCheck, settings

from envkit.errors import BadInput

# derandomized: the same examples on every run and every day; under `make mutation` (ENVKIT_PROPERTY_EXAMPLES, as
# tests/core/test_properties.py) fewer, so that a mutant's verdict stays cheap
_EXAMPLES = min(150, int(os.environ.get("ENVKIT_PROPERTY_EXAMPLES", "0")) or 150)
SETTINGS = settings(max_examples=_EXAMPLES, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow])


def bounded_call(fn, *args, limit: float = 2.0, refusals: tuple[type[BaseException], ...] = (BadInput,), **kwargs):
    """`fn(...)`'s value, or None for one of `refusals`, within `limit` seconds; any other exception fails the test
    (it would be exit 3 through the command line)."""
    start = time.monotonic()
    try:
        out = fn(*args, **kwargs)
    except refusals:
        out = None
    assert time.monotonic() - start < limit, f"{fn.__name__} took {time.monotonic() - start:.1f} s"
    return out
