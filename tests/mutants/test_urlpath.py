"""envkit/io/urlpath.py, pinned where `make mutation MODULES=inputs` found its mutants alive: the words of each
refusal, a `;` parameter after a dot segment, a path still encoded after the last decoding, a mirror that climbs."""

from __future__ import annotations

import pytest

from envkit.io import urlpath


def refused(url: str) -> str:
    with pytest.raises(ValueError) as info:
        urlpath.decoded_path(url)
    return str(info.value)


def test_a_path_that_is_no_utf8_is_named_by_its_first_80_characters():
    path = "/m/" + "a" * 90 + "%c0%ae"
    assert refused("file://" + path) == f"its path is not UTF-8 once percent-decoded ({path[:80]!r})"


def test_a_path_still_encoded_after_three_decodings_is_refused():
    # %25252580 -> %252580 -> %2580 -> %80: a fourth decoding would still change it (to a replacement character)
    assert refused("file:///m/%25252580") == "its path is still percent-encoded after 3 decodings"
    assert refused("file:///m/%252580") == "its path is not UTF-8 once percent-decoded ('/m/%80')"


def test_a_backslash_and_a_control_character_are_named():
    assert refused("file:///m/a%5cb") == "its path holds a backslash once decoded"
    assert refused("file:///m/a%01b") == "its path holds the control character '\\x01' once decoded"
    assert refused("file:///m/a%5db%01") == "its path holds the control character '\\x01' once decoded"


def test_a_dot_segment_with_parameters_is_refused_and_named_by_20_characters():
    seg = "..;a;" + "b" * 30
    assert refused(f"file:///m/{seg}/x") == f"its path has a {seg[:20]!r} segment once decoded (it could climb out of its mirror)"


def test_a_url_is_not_under_a_mirror_whose_own_path_is_refused():
    assert urlpath.under("file:///m/a", "file:///m/%2e%2e/") is False
    assert urlpath.under("file:///m/a", "file:///m/") is True
