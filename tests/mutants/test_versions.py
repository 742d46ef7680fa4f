"""envkit.versions: the cases that `make mutation` showed no test held (bounds, operators, spellings, messages)."""

from __future__ import annotations

import pytest

from envkit.versions import (
    InvalidVersion,
    in_range,
    in_series,
    newest_first,
    parse,
    parse_ranges,
    patch_base,
    python_tag,
    satisfies,
)


def test_closed_range_includes_both_bounds():
    assert in_range("7.0.0", "7.0.0", "7.5.99")
    assert in_range("7.5.99", "7.0.0", "7.5.99")
    assert not in_range("7.5.100", "7.0.0", "7.5.99")


def test_a_series_includes_its_own_base():
    assert in_series("8.5", "8.5.X")
    assert not in_series("8", "8.5.X")


def test_newest_first_orders_by_version_not_by_text():
    assert newest_first(["9.0", "24.1.rc3", "10.0", "24.1.0"]) == ["24.1.0", "24.1.rc3", "10.0", "9.0"]


def test_ranges_with_spaces_and_their_error():
    assert parse_ranges("[7.0.0, 7.5.99], [8.0 ,8.0.]") == [("7.0.0", "7.5.99"), ("8.0", "8.0.")]
    with pytest.raises(InvalidVersion, match=r"not a list of version ranges: 'nope'"):
        parse_ranges("nope")


@pytest.mark.parametrize(
    ("text", "base"),
    [
        ("24.1.0.3+local", "24.1.0"),  # the local label goes before the patch number is read
        ("24.1.0.3+a+1", "24.1.0"),  # only the first '+' starts the label
        ("1.2.z9.4", None),  # the base must itself be a version
    ],
)
def test_patch_base_spellings(text, base):
    assert patch_base(text) == base


def test_python_tag():
    assert python_tag("3.11") == "cp311"
    assert python_tag("3.10.4") == "cp310"


def test_series_default_depth_is_major_minor():
    assert parse("8.5.1").series() == (8, 5)


@pytest.mark.parametrize("spec", ["", "   "])
def test_an_empty_specifier_allows_anything(spec):
    assert satisfies("1.0", spec)


@pytest.mark.parametrize(
    ("version", "spec", "ok"),
    [
        # wildcards: the prefix is every number before '.*'; '!=' negates; later parts still apply
        ("2.13.1", "==2.13.0.*", False),
        ("2.13.0.5", "==2.13.0.*", True),
        ("2.12.0", "!=2.13.*", True),
        ("2.13.4", "!=2.13.*", False),
        ("2.13.5", "==2.13.*,<2.13.3", False),
        # each operator, at and beside its bound
        ("2.6.1", "==2.6.0", False),
        ("2.6.1", "!=2.6.0", True),
        ("2.6.0", "!=2.6.0", False),
        ("3.0", ">=2.6.0", True),
        ("2.6.0", "<=2.6.0", True),
        ("1.0", "<=2.6.0", True),
        ("2.6.1", "<=2.6.0", False),
        ("2.6.0", ">2.6.0", False),
        ("3.0", ">2.6.0", True),
        # ~=: at least the version, below the next release of its second-to-last number
        ("2.6.1", "~=2.6.1", True),
        ("2.5", "~=2.6.1", False),
        ("2.7", "~=2.6.1", False),
        ("2.7.0", "~=2.6.1", False),
        ("2.8.0", "~=2.6.1", False),
        ("1.2.5", "~=1.2.3.4", False),
        ("1.2.3.9", "~=1.2.3.4", True),
    ],
)
def test_specifier_operators(version, spec, ok):
    assert satisfies(version, spec) is ok


def test_specifier_errors_name_the_specifier():
    with pytest.raises(InvalidVersion, match=r"not a version specifier: '=~1.0'"):
        satisfies("1.0", "=~1.0")
    with pytest.raises(InvalidVersion, match=r"wildcard only with == or !=: '>=1.\*'"):
        satisfies("1.0", ">=1.*")


def test_a_version_keeps_what_it_is_made_with():
    """Version's own constructor (parse's results may be cached from before a test): each field as given."""
    from envkit.versions import Version

    v = Version("2.1.0+cpu", ((0, 2), (0, 1), (0, 0)), (2, 1, 0), "cpu")
    assert (v.text, v.key, v.release, v.local, str(v)) == ("2.1.0+cpu", ((0, 2), (0, 1), (0, 0)), (2, 1, 0), "cpu", "2.1.0+cpu")
