"""The bundle's last step before its manifest (`envkit.jobs.bundle.plan._with_sums`): the entries sorted by path,
SHA256SUMS over all of them added in its place, and two entries at one path refused, whichever they are."""

from __future__ import annotations

import hashlib

import pytest

from envkit.errors import BadInput
from envkit.jobs.bundle.plan import _blob, _with_sums


def test_the_sums_cover_every_entry_and_take_their_place_in_the_order():
    entries, sums = _with_sums([_blob("wheels/target/b.whl", b"b"), _blob("README.md", b"r"), _blob("x/a", b"a")])
    assert [e.path for e in entries] == ["README.md", "SHA256SUMS", "wheels/target/b.whl", "x/a"]
    assert sums.data == b"".join(
        f"{hashlib.sha256(d).hexdigest()}  {p}\n".encode()
        for p, d in (("README.md", b"r"), ("wheels/target/b.whl", b"b"), ("x/a", b"a"))
    )


@pytest.mark.parametrize("at", [0, 1, 2])
def test_two_entries_at_one_path_are_refused_wherever_they_stand(at):
    rest = [_blob("a", b"1"), _blob("m", b"2"), _blob("z", b"3")]
    twin = _blob(rest[at].path, b"other")
    with pytest.raises(BadInput) as info:
        _with_sums([*rest[:at], twin, *rest[at:]])
    assert info.value.message == f"two bundle entries share a path: {[rest[at].path]}"
