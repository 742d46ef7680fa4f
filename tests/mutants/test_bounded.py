"""envkit/io/bounded.py, pinned where `make mutation MODULES=inputs` found its mutants alive: each refusal's words,
hint and place (what a user reads: the value, the key, what is allowed), and each limit on both sides."""

from __future__ import annotations

import pytest

from envkit.errors import BadInput, Where
from envkit.io import bounded

W = Where("hosts.ini", 7, "ansible_port")


def refusal(fn, *args, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as info:
        fn(*args, **kwargs)
    return info.value


def test_integer_words_hint_and_place():
    e = refusal(bounded.integer, "x1", "count", lo=0, hi=999, where=W)
    assert (e.message, e.hint, e.where) == ("count='x1' is not a whole number of at most 3 digits", "0 to 999", W)
    e = refusal(bounded.integer, "1000", "count", lo=0, hi=999, where=W, hint="a count")
    assert (e.message, e.hint, e.where) == ("count='1000' is not a whole number of at most 3 digits", "a count", W)
    e = refusal(bounded.integer, "5", "count", lo=6, hi=999, where=W)
    assert (e.message, e.hint, e.where) == ("count=5 is out of range", "6 to 999", W)
    e = refusal(bounded.integer, "5", "count", lo=6, hi=999, hint="six up")
    assert (e.hint, e.where) == ("six up", None)
    long = "x" * 41
    assert (
        refusal(bounded.integer, long, "n", lo=0, hi=9).message
        == f"n={'x' * 40 + '...'!r} is not a whole number of at most 1 digits"
    )
    assert (
        refusal(bounded.integer, "x" * 40, "n", lo=0, hi=9).message == f"n={'x' * 40!r} is not a whole number of at most 1 digits"
    )


@pytest.mark.parametrize(("text", "value"), [("0", 0), ("999", 999), ("007", 7), ("6", 6)])
def test_integer_accepts_its_whole_range(text, value):
    assert bounded.integer(text, "n", lo=0, hi=999) == value


def test_port_words_hint_and_place():
    e = refusal(bounded.port, "0", "ansible_port", W)
    assert (e.message, e.hint, e.where) == ("ansible_port=0 is out of range", "a TCP port: 1 to 65535", W)
    e = refusal(bounded.port, "p", "ansible_port", W)
    assert (e.message, e.hint, e.where) == (
        "ansible_port='p' is not a whole number of at most 5 digits",
        "a TCP port: 1 to 65535",
        W,
    )
    assert bounded.port("65535", "p") == 65535 and bounded.port("1", "p") == 1


@pytest.mark.parametrize(
    ("text", "value"),
    [("4096", 4096), ("8K", 8 << 10), ("8kb", 8 << 10), ("8KiB", 8 << 10), ("1m", 1 << 20), ("1MB", 1 << 20), ("1MiB", 1 << 20),
     ("1g", 1 << 30), ("1GB", 1 << 30), ("1GiB", 1 << 30), ("3b", 3), ("3B", 3), (" 2 K ", 2 << 10), (" " * 29 + "1G", 1 << 30)],
)  # fmt: skip
def test_size_units_are_binary_and_case_blind(text, value):
    assert bounded.size(text, "--max-size", hi=1 << 40) == value


def test_size_words_hint_and_place():
    e = refusal(bounded.size, "1 T", "--max-size", hi=1 << 40, where=W)
    assert (e.message, e.hint, e.where) == (
        "--max-size: not a size: '1 T'",
        "write sizes like 8K, 1MiB, 64M or 1G (binary units)",
        W,
    )
    e = refusal(bounded.size, " 2G ", "--max-size", hi=1 << 30, where=W)
    assert (e.message, e.where) == (f"--max-size: 2G is over the largest size, {1 << 30} bytes", W)
    assert bounded.size("1G", "s", hi=1 << 30) == 1 << 30  # the cap itself is allowed
    assert refusal(bounded.size, "x" * 41, "s", hi=9).message == f"s: not a size: {'x' * 40 + '...'!r}"
    assert refusal(bounded.size, "x" * 40, "s", hi=9).message == f"s: not a size: {'x' * 40!r}"


def test_size_text_is_capped_at_32_characters_before_matching():
    assert bounded.size(" " * 30 + "1G", "s", hi=1 << 30) == 1 << 30  # 32 characters
    refusal(bounded.size, " " * 31 + "1G", "s", hi=1 << 30)  # 33: refused though the pattern would match
    assert bounded.size("1" * 19, "s", hi=10**19) == int("1" * 19)
    refusal(bounded.size, "1" * 20, "s", hi=10**20)


def test_address_words_and_place():
    e = refusal(bounded.address, "fe80::1%eth0", "ip", where=W)
    assert (e.message, e.where) == ("ip='fe80::1%eth0' is not an IP address (no scope id)", W)
    e = refusal(bounded.address, "10.0.0", "ip", where=W)
    assert (e.message, e.where) == ("ip='10.0.0' is not an IP address", W)
    e = refusal(bounded.address, "10.0.0.1", "ip", family=6, where=W)
    assert (e.message, e.where) == ("ip=10.0.0.1 is an IPv4 address; IPv6 is expected here", W)
    e = refusal(bounded.address, "::1", "ip", family=4)
    assert e.message == "ip=::1 is an IPv6 address; IPv4 is expected here"
    assert refusal(bounded.address, "1" * 61, "ip").message == f"ip={'1' * 60!r} is not an IP address (no scope id)"


def test_address_length_cap_is_the_longest_ipv6_text():
    longest = "0000:0000:0000:0000:0000:ffff:255.255.255.255"
    assert len(longest) == 45 and bounded.address(longest, "ip") == longest
    refusal(bounded.address, " " + longest, "ip")  # 46 characters
    assert bounded.address("10.0.0.1", "ip", family=4) == "10.0.0.1"
    assert bounded.address("fe80::1", "ip", family=6) == "fe80::1"


@pytest.mark.parametrize("bad", ["a\nb", "a\rb", "a\0b", "x" * 11])
def test_text_refuses_lines_and_length(bad):
    e = refusal(bounded.text, bad, "name", limit=10, where=W)
    assert (e.message, e.where) == ("name is longer than 10 characters or spans lines", W)


def test_text_keeps_a_value_at_its_limit():
    assert bounded.text("x" * 10, "name", limit=10) == "x" * 10
    assert bounded.text("x" * bounded.MAX_TEXT, "name") == "x" * bounded.MAX_TEXT
    refusal(bounded.text, "x" * (bounded.MAX_TEXT + 1), "name")


def test_host_range_words_hint_and_place():
    e = refusal(bounded.host_range, "n" * 254, W)
    assert (e.message, e.where) == (f"host name {'n' * 60}... is not a plain host name: longer than 253 characters", W)
    assert bounded.host_range("n" * 253) == ["n" * 253]
    e = refusal(bounded.host_range, "n[3:1]", W)
    assert (e.message, e.where) == ("host range n[3:1] runs backwards", W)
    e = refusal(bounded.host_range, "n[0:10]", W, cap=10)
    assert (e.message, e.hint, e.where) == (
        "host range n[0:10] makes more than 10 hosts",
        "An inventory holds at most 10 hosts.",
        W,
    )
    assert len(bounded.host_range("n[1:10]", cap=10)) == 10
    e = refusal(bounded.host_range, "n[0:1000000001]", W)
    assert (e.message, e.hint, e.where) == ("host range [0:1000000001] end=1000000001 is out of range", "0 to 1000000000", W)
    e = refusal(bounded.host_range, "n[0:10000000000]", W)
    assert e.message == "host range [0:10000000000] end='10000000000' is not a whole number of at most 10 digits"
    e = refusal(bounded.host_range, "n[1000000001:1]", W)
    assert e.message.startswith("host range [1000000001:1] start=") and e.where == W
    assert bounded.host_range("n[1000000000:1000000000]") == ["n1000000000"]


def test_host_range_pads_only_a_zero_padded_start_and_keeps_the_rest_of_the_name():
    assert bounded.host_range("a[8:10].b") == ["a8.b", "a9.b", "a10.b"]
    assert bounded.host_range("a[08:10].b") == ["a08.b", "a09.b", "a10.b"]
    assert bounded.host_range("a[0:1]") == ["a0", "a1"]
    assert bounded.host_range("x[1:2]y[3:3]z") == ["x1y3z", "x2y3z"]
    assert bounded.host_range("plain") == ["plain"]


@pytest.mark.parametrize(
    ("text", "ok"),
    [("0", True), ("123", True), ("1234", False), ("", False), ("²", False), ("١", False), ("1 ", False), ("-1", False)],
)
def test_is_digits_is_ascii_digits_of_bounded_length(text, ok):
    assert bounded.is_digits(text, 3) is ok


def test_an_address_over_45_characters_is_refused_before_ipaddress_reads_it():
    assert refusal(bounded.address, " " * 46, "ip").message == f"ip={' ' * 46!r} is not an IP address (no scope id)"
    assert refusal(bounded.address, " " * 45, "ip").message == f"ip={' ' * 45!r} is not an IP address"


def test_text_refuses_only_line_breaks_and_nul():
    assert bounded.text("XX", "name") == "XX"
