"""The fetch module's pure rules at their edges, word for word (`make mutation MODULES=ansible` left them unchecked):
where a redirect may lead and what the refusal says, cut at 200 characters; a `files` entry's checks and their
messages; the error lines of a run, each once."""

from __future__ import annotations

import pytest

from tests.provision.modules import ansible_module

ef = ansible_module("envkit_fetch")
SHA = "ab" * 32


@pytest.mark.parametrize(
    ("current", "location", "want"),
    [
        ("http://m/b/x.whl", "  /c/x.whl  ", "http://m/c/x.whl"),  # a relative Location, its spaces stripped
        ("http://m/b/x.whl", "https://n/x.whl", "https://n/x.whl"),  # up to https: allowed
        ("https://m/b/x.whl", "https://n/y", "https://n/y"),
    ],
)
def test_a_redirect_leads_where_the_location_says(current, location, want):
    assert ef._next_hop(current, location) == want


def test_a_redirect_out_of_http_or_down_to_plain_http_is_refused_word_for_word():
    with pytest.raises(ef.Failed) as err:
        ef._next_hop("http://m/x", "file:///etc/passwd")
    assert str(err.value) == "redirects to file:///etc/passwd, not an http(s) URL: refused"
    with pytest.raises(ef.Failed) as err:
        ef._next_hop("https://m/x", "http://m/x")
    assert str(err.value) == "redirects from https to http://m/x (plain http): refused"
    long = "ftp://m/" + "a" * 300
    with pytest.raises(ef.Failed) as err:
        ef._next_hop("http://m/x", long)
    assert str(err.value) == f"redirects to {long[:200]}, not an http(s) URL: refused"
    long = "http://m/" + "b" * 300
    with pytest.raises(ef.Failed) as err:
        ef._next_hop("https://m/x", long)
    assert str(err.value) == f"redirects from https to {long[:200]} (plain http): refused"


def test_a_files_entry_is_checked_and_each_refusal_names_it():
    ok = ef._spec({"path": "wheels/a.whl", "sha256": SHA.upper()}, 1 << 20)
    assert ok == {"path": "wheels/a.whl", "sha256": SHA, "name": "a.whl", "size": 0}
    at_cap = ef._spec({"path": "a.whl", "sha256": SHA, "name": "b.whl", "size": 1 << 20}, 1 << 20)
    assert at_cap == {"path": "a.whl", "sha256": SHA, "name": "b.whl", "size": 1 << 20}
    for raw, message in (
        ("wheels/a.whl", "each file is a mapping with path and sha256, not 'wheels/a.whl'"),
        ({"path": "", "sha256": SHA}, "not a path in the bundle: ''"),
        ({"path": "/etc/passwd", "sha256": SHA}, "not a path in the bundle: '/etc/passwd'"),
        ({"path": "a\0b", "sha256": SHA}, "not a path in the bundle: 'a\\x00b'"),
        ({"path": "a.whl", "sha256": "xyz"}, "a.whl: not a sha256: 'xyz'"),
        ({"path": "a.whl", "sha256": SHA, "name": "x/y"}, "a.whl: not a plain file name: 'x/y'"),
        ({"path": "a.whl", "sha256": SHA, "name": ".."}, "a.whl: not a plain file name: '..'"),
        ({"path": "a.whl", "sha256": SHA, "size": (1 << 20) + 1}, "a.whl: size 1048577 is out of range (0 to 1048576)"),
        ({"path": "a.whl", "sha256": SHA, "size": -1}, "a.whl: size -1 is out of range (0 to 1048576)"),
        ({"path": "a.whl", "sha256": SHA, "size": "x"}, "a.whl: size 'x' is not a number of bytes"),
    ):
        with pytest.raises(ValueError) as err:
            ef._spec(raw, 1 << 20)
        assert str(err.value) == message


def test_the_error_lines_of_a_run_come_once_each_in_their_first_order():
    results = [{"errors": ["b", "a"]}, {"errors": []}, {"errors": ["a", "c", "b"]}]
    assert ef.unique_errors(results) == ["b", "a", "c"]
