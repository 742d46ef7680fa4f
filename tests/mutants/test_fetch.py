"""The fetch module's pure rules at their edges, word for word (`make mutation MODULES=ansible` left them unchecked):
where a redirect may lead and what the refusal says, cut at 200 characters; a `files` entry's checks and their
messages; the error lines of a run, each once."""

from __future__ import annotations

import http.client
import ssl

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


def test_a_url_on_a_mirror_keeps_the_mirror_s_own_path():
    assert ef.url_of("http://m/repoX//", "wheels/a b+c.whl") == "http://m/repoX/wheels/a%20b%2Bc.whl"


def test_more_files_entry_refusals_word_for_word():
    long_path, long_name, long_sha = "p" * 250, "n" * 250, "s" * 100
    for raw, message in (
        ({"path": "a.whl"}, "a.whl: not a sha256: ''"),  # no sha256 at all
        ({"path": "/" + long_path, "sha256": SHA}, f"not a path in the bundle: {('/' + long_path)[:200]!r}"),
        ({"path": long_path, "sha256": long_sha}, f"{long_path[:200]}: not a sha256: {long_sha[:80]!r}"),
        (
            {"path": long_path, "sha256": SHA, "name": long_name + "/"},
            f"{long_path[:200]}: not a plain file name: {long_name[:200]!r}",
        ),
        ({"path": "a.whl", "sha256": SHA, "name": "."}, "a.whl: not a plain file name: '.'"),
        ({"path": "a.whl", "sha256": SHA, "name": "a\0b"}, "a.whl: not a plain file name: 'a\\x00b'"),
        ({"path": "w/x/.", "sha256": SHA}, "w/x/.: not a plain file name: '.'"),  # the name taken from the path
        ({"path": long_path, "sha256": SHA, "size": "1k"}, f"{long_path[:200]}: size '1k' is not a number of bytes"),
        ({"path": long_path, "sha256": SHA, "size": 1 << 21}, f"{long_path[:200]}: size 2097152 is out of range (0 to 1048576)"),
    ):
        with pytest.raises(ValueError) as err:
            ef._spec(raw, 1 << 20)
        assert str(err.value) == message
    nested = ef._spec({"path": "wheels/sub/a.whl", "sha256": SHA}, 1 << 20)
    assert nested == {"path": "wheels/sub/a.whl", "sha256": SHA, "name": "a.whl", "size": 0}


# --- plan_body: what to read of an answer, against responses as http.client gives them --------------------------------


class _Resp:
    """A response's status, reason and headers (http.client's HTTPMessage, as `_request` returns them)."""

    def __init__(self, status, *headers, reason=""):
        self.status, self.reason = status, reason
        self.headers = http.client.HTTPMessage()
        for name, value in headers:
            self.headers[name] = value  # adds: a name given twice is sent twice


def _refusal(resp, start=0, size=0, cap=1 << 20):
    with pytest.raises(ef.Failed) as err:
        ef.plan_body(resp, start, size, cap)
    return str(err.value)


def test_a_status_other_than_200_or_206_is_named_with_its_reason_if_any():
    assert _refusal(_Resp(500)) == "HTTP 500"
    assert _refusal(_Resp(404, reason="Not Found")) == "HTTP 404 Not Found"


def test_a_header_sent_twice_with_different_values_is_refused_naming_it_and_four_values():
    values = [("Content-Length", str(n)) for n in range(1, 7)]
    assert _refusal(_Resp(200, *values)) == "Content-Length sent twice with different values ['1', '2', '3', '4']: refused"
    assert _refusal(_Resp(200, ("Content-Encoding", "gzip"), ("Content-Encoding", "br"))) == (
        "Content-Encoding sent twice with different values ['gzip', 'br']: refused"
    )
    twice = _Resp(206, ("Content-Range", "bytes 5-9/10"), ("Content-Range", "bytes 5-8/10"))
    assert _refusal(twice, start=5) == "Content-Range sent twice with different values ['bytes 5-9/10', 'bytes 5-8/10']: refused"
    # the same value twice is one value
    assert ef.plan_body(_Resp(200, ("Content-Length", "3"), ("Content-Length", " 3")), 0, 3, 10) == (0, 3)


def test_an_encoded_or_malformed_answer_is_refused_word_for_word():
    assert _refusal(_Resp(200, ("Content-Encoding", "GZIP"))) == "a gzip-encoded body, which was not asked for: refused"
    enc = "x" * 60
    assert _refusal(_Resp(200, ("Content-Encoding", enc))) == f"a {enc[:40]}-encoded body, which was not asked for: refused"
    assert ef.plan_body(_Resp(200, ("Content-Encoding", "Identity"), ("Content-Length", "4")), 0, 4, 10) == (0, 4)
    assert _refusal(_Resp(200, ("Content-Length", "12x"))) == "a malformed Content-Length '12x': refused"
    bad = "9" * 30 + "z" * 30
    assert _refusal(_Resp(200, ("Content-Length", bad))) == f"a malformed Content-Length {bad[:40]!r}: refused"


def test_a_whole_answer_longer_or_other_than_the_file_is_refused():
    assert _refusal(_Resp(200, ("Content-Length", "5")), size=4) == "announces 5 bytes; the file has 4: refused"
    assert _refusal(_Resp(200, ("Content-Length", "3")), size=4) == "announces 3 bytes; the file has 4: refused"
    assert _refusal(_Resp(200, ("Content-Length", "11")), cap=10) == "announces 11 bytes; the file has at most 10: refused"
    assert ef.plan_body(_Resp(200, ("Content-Length", "10")), 0, 0, 10) == (0, 10)
    assert ef.plan_body(_Resp(200), 0, 4, 10) == (0, None)


def test_a_known_size_is_the_bound_of_an_answer_not_the_cap():
    assert ef.plan_body(_Resp(200, ("Content-Length", "20")), 0, 20, 10) == (0, 20)
    assert ef.plan_body(_Resp(206, ("Content-Range", "bytes 5-19/20")), 5, 20, 10) == (5, 15)


def test_a_range_answer_must_answer_the_range_asked_for():
    assert _refusal(_Resp(206, ("Content-Range", "bytes 0-9/10"))) == "HTTP 206 to a request for the whole file: refused"
    assert _refusal(_Resp(206), start=5) == "Content-Range '' does not answer bytes=5- of the file"
    junk = "items " + "1" * 100
    assert _refusal(_Resp(206, ("Content-Range", junk)), start=5) == (
        f"Content-Range {junk[:80]!r} does not answer bytes=5- of the file"
    )
    for crange, size in (
        ("bytes 4-19/20", 20),  # from another byte
        ("bytes 5-8/20", 20),  # not up to the end
        ("bytes 5-14/15", 20),  # another total than the size
        ("bytes 5-19/20", 0),  # more than the cap (10 here) of a file of unknown size
    ):
        assert _refusal(_Resp(206, ("Content-Range", crange)), start=5, size=size, cap=10 if not size else 1 << 20) == (
            f"Content-Range {crange!r} does not answer bytes=5- of the file"
        ), crange
    assert ef.plan_body(_Resp(206, ("Content-Range", "bytes 5-19/20")), 5, 20, 1 << 20) == (5, 15)
    assert ef.plan_body(_Resp(206, ("Content-Range", "bytes 5-9/10")), 5, 0, 10) == (5, 5)


def test_a_range_answer_whose_length_disagrees_with_its_range_is_refused():
    resp = _Resp(206, ("Content-Range", "bytes 5-19/20"), ("Content-Length", "3"))
    assert _refusal(resp, start=5, size=20) == "Content-Length 3 does not match Content-Range 'bytes 5-19/20': refused"
    ok = _Resp(206, ("Content-Range", "bytes 5-19/20"), ("Content-Length", "15"))
    assert ef.plan_body(ok, 5, 20, 1 << 20) == (5, 15)


# --- _why: the line a failed try leaves -------------------------------------------------------------------------------


def test_why_a_try_failed_in_words():
    assert ef._why(ef.Failed("HTTP 404 Not Found")) == "HTTP 404 Not Found"
    assert ef._why(TimeoutError()) == "no data for the silence timeout (stalled)"
    cert = ssl.SSLCertVerificationError(1, "[SSL: CERTIFICATE_VERIFY_FAILED] certificate verify failed")
    cert.verify_message = "self-signed certificate"
    assert ef._why(cert) == "TLS certificate not trusted: self-signed certificate"
    cert.verify_message = None
    assert ef._why(cert) == f"TLS certificate not trusted: {cert}"
    assert ef._why(ConnectionRefusedError(111, "Connection refused")) == "ConnectionRefusedError: [Errno 111] Connection refused"
    long = ef._why(ValueError("v" * 400))
    assert long == ("ValueError: " + "v" * 400)[:300] and len(long) == 300
