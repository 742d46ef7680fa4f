"""envkit.io.clock: the one reader of the calendar, fixed by SOURCE_DATE_EPOCH."""

from __future__ import annotations

import datetime

import pytest

from envkit.errors import BadInput
from envkit.io import clock


@pytest.mark.parametrize(
    ("epoch", "day"),
    [
        ("0", "1970-01-01"),
        ("86399", "1970-01-01"),  # the last second of a UTC day
        ("86400", "1970-01-02"),
        ("1796083200", "2026-12-01"),
        ("999999999999", None),  # 12 digits: the grammar takes it; past the years Python holds
    ],
)
def test_source_date_epoch_fixes_the_day(monkeypatch, epoch, day):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", epoch)
    if day is None:
        with pytest.raises(BadInput, match="past the dates"):
            clock.today()
    else:
        assert clock.today() == day


@pytest.mark.parametrize("bad", ["-1", "1e9", " 86400", "８６４００", "²", "1_000", "1" * 13, "0x10"])
def test_a_source_date_epoch_that_is_not_ascii_seconds_is_bad_input(monkeypatch, bad):
    monkeypatch.setenv("SOURCE_DATE_EPOCH", bad)
    with pytest.raises(BadInput) as info:
        clock.today()
    assert info.value.exit_code == 2 and "SOURCE_DATE_EPOCH" in info.value.message


def test_without_source_date_epoch_the_system_utc_date(monkeypatch):
    monkeypatch.delenv("SOURCE_DATE_EPOCH", raising=False)
    before = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    got = clock.today()
    after = datetime.datetime.now(datetime.timezone.utc).date().isoformat()
    assert got in {before, after}
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "")
    assert clock.today() in {before, after}
