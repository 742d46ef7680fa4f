"""envkit/fleet/inventory.py, pinned for `make mutation MODULES=fleet`: each refusal's words, hint and place (the
inventory or hccn.conf, its line, the key), each cap on both sides (10,000 hosts, 40,000 host entries, 1,024 groups,
16,384 [group:children] entries, 253-character names, device ids 0 to 64), the merged variables of every host (host
over child group over parent group over `all`, ties by name) with their first line, and the hccn.conf devices."""

from __future__ import annotations

import ipaddress
from pathlib import Path

import pytest

from envkit.errors import BadInput, Where
from envkit.fleet.inventory import (
    HccnDevice,
    Host,
    Inventory,
    _pairs,
    is_address,
    parse_hccn_conf,
    parse_inventory,
    read_hccn_conf,
    read_inventory,
)

P = Path("site/hosts.ini")
F = str(P)
IP = "[all:vars]\nansible_host=192.0.2.1\n"  # every host an IP address: the big inventories skip the DNS pattern
HOST_HINT = "Host names are letters, digits and _ . : - (at most 253), no '/': they name folders hosts/<name>."
ADDRESS_HINT = "Set ansible_host to the host's IP address or DNS name."
SECTION_HINT = "Use [group], [group:vars] or [group:children]."
HCCN_HINT = "hccn.conf holds address_N=IP and netmask_N=MASK per device N."
DEVICE_HINT = "device ids are 0 to 64 (/dev/davinciN)"


def at(line: int | None = None) -> Where:
    return Where(F, line)


def refusal(text: str) -> BadInput:
    with pytest.raises(BadInput) as info:
        parse_inventory(text, P)
    return info.value


def said(e: BadInput) -> tuple[str, str | None, Where | None]:
    return (e.message, e.hint, e.where)


def variables(text: str) -> dict[str, dict[str, str]]:
    return {h.name: h.vars for h in parse_inventory(text, P).hosts}


# --- is_address, Host, Inventory, _pairs ------------------------------------------------------------------------------
LABELS_253 = ".".join(["a" * 63, "b" * 63, "c" * 63, "d" * 61])


@pytest.mark.parametrize(
    ("value", "ok"),
    [("192.0.2.1", True), ("fe80::1", True), ("node0.example", True), ("node0.example.", True), ("n_0", True),
     (LABELS_253, True), (LABELS_253 + "d", False), ("fe80::1%eth0", False), ("fe80::1%", False), ("$(reboot)", False),
     ("a b", False), ("", False), ("a:b", False), ("-a", False)],
)  # fmt: skip
def test_is_address_an_ip_or_a_dns_name_of_at_most_253_characters(value, ok):
    assert len(LABELS_253) == 253
    assert is_address(value) is ok


def test_a_host_address_is_ansible_host_or_its_name_and_inventory_host_finds_by_name():
    a, b = Host("a", {}, 1), Host("b", {"ansible_host": "192.0.2.2"}, 2)
    assert (a.address, b.address) == ("a", "192.0.2.2")
    inv = Inventory(P, [a, b])
    assert inv.host("b") is b and inv.host("a") is a
    assert Inventory(P).hosts == []


def test_pairs_split_at_the_first_equals_sign_and_refuse_a_bare_word():
    w = Where(F, 4)
    assert _pairs(["a=1", "b=x=y", "c="], w) == {"a": "1", "b": "x=y", "c": ""}
    assert _pairs([], w) == {}
    with pytest.raises(BadInput) as info:
        _pairs(["a=1", "oops"], w)
    assert said(info.value) == ("expected key=value, found 'oops'", "Host variables are written key=value.", w)


# --- parse_inventory: what it reads -----------------------------------------------------------------------------------
FULL = """# a comment
; another comment
n0 ansible_host=192.0.2.1

[ungrouped:vars]
u=1
[ g ]
X1 h=1 # a trailing comment
n[08:10] x=host
n0 a="quoted value" b=x=y
[g:vars]
x = group
k=a=b
e=
q = "two  words" # c
w = one   two
[all:vars]
x=all
z=all
"""


def test_an_inventory_read_whole_hosts_in_order_with_their_first_line_and_merged_variables():
    inv = parse_inventory(FULL, P)
    assert inv.path == P and isinstance(inv.path, Path)
    assert [(h.name, h.line) for h in inv.hosts] == [("n0", 3), ("X1", 8), ("n08", 9), ("n09", 9), ("n10", 9)]
    group = {"x": "group", "z": "all", "k": "a=b", "e": "", "q": "two  words", "w": "one two"}
    assert inv.host("n0").vars == {**group, "u": "1", "ansible_host": "192.0.2.1", "a": "quoted value", "b": "x=y"}
    assert inv.host("X1").vars == {**group, "h": "1"}
    assert inv.host("n09").vars == {**group, "x": "host"}
    assert inv.host("n0").address == "192.0.2.1" and inv.host("n10").address == "n10"


def test_variables_outside_any_vars_section_and_before_any_header_and_a_group_header_with_spaces():
    assert variables("n0\n[ungrouped:vars]\nv=u\n") == {"n0": {"v": "u"}}
    assert variables("[ a ]\nn0\n[a:vars]\nv=a\n") == {"n0": {"v": "a"}}
    assert variables("[a:hosts]\nn0\n[a:vars]\nv=a\n") == {"n0": {"v": "a"}}


def test_the_first_line_and_the_last_line_are_read():
    assert [(h.name, h.line) for h in parse_inventory("n0\n\n\nn1", P).hosts] == [("n0", 1), ("n1", 4)]
    assert said(refusal("n0 x")) == ("expected key=value, found 'x'", "Host variables are written key=value.", at(1))
    assert said(refusal("n0\n\nn1 x")) == ("expected key=value, found 'x'", "Host variables are written key=value.", at(3))


def test_a_host_listed_twice_keeps_its_first_line_and_gathers_its_variables():
    inv = parse_inventory("[a]\nn1\nn0 x=1\n[b]\nn0 y=2 x=3\n", P)
    assert [(h.name, h.line, h.vars) for h in inv.hosts] == [("n1", 2, {}), ("n0", 3, {"x": "3", "y": "2"})]


# --- parse_inventory: group precedence --------------------------------------------------------------------------------
def test_a_child_group_beats_its_parent_even_when_its_name_sorts_first():
    text = "[p:children]\na\n[a]\nn0\n[p]\nn0\n[p:vars]\nx=p\ny=p\n[a:vars]\nx=a\n"
    assert variables(text) == {"n0": {"x": "a", "y": "p"}}


def test_the_longest_chain_of_parents_counts_not_the_shortest():
    """b is below x twice: directly (depth 2) and through y (depth 3); c is x's child (depth 2): b wins over c."""
    text = "[x:children]\nb\nc\ny\n[y:children]\nb\n[b]\nn0\n[c]\nn0\n[b:vars]\nv=b\n[c:vars]\nv=c\n"
    assert variables(text) == {"n0": {"v": "b"}}
    # b below y (depth 3) is walked before b below a (depth 2): the shallower parent, walked last, does not lower it
    text = "[a:children]\nb\n[x:children]\ny\nc\n[y:children]\nb\n[b]\nn0\n[c]\nn0\n[b:vars]\nv=b\n[c:vars]\nv=c\n"
    assert variables(text) == {"n0": {"v": "b"}}


def test_groups_outside_the_graph_rank_with_its_roots_and_below_its_children():
    text = "[b:children]\nc\n[b]\nn0\n[z]\nn0\nn1\n[c]\nn1\n[b:vars]\nx=b\n[c:vars]\nx=c\n[z:vars]\nx=z\n"
    assert variables(text) == {"n0": {"x": "z"}, "n1": {"x": "c"}}  # n0: b and z both depth 1, z sorts last


def test_an_ancestor_reached_by_two_paths_reaches_every_descendant():
    """k has two parents (a, p); a is walked last: its variables still reach k's child g."""
    text = "[a:children]\nk\n[r:children]\np\n[p:children]\nk\n[k:children]\ng\n[g]\nn0\n[a:vars]\nva=1\n[r:vars]\nvr=1\n"
    assert variables(text) == {"n0": {"va": "1", "vr": "1"}}


def test_the_all_group_is_the_base_not_a_group_ranked_by_name():
    text = "[a]\nn0\n[all]\nn0\n[a:vars]\nx=a\n[all:vars]\nx=all\ny=all\n"
    assert variables(text) == {"n0": {"x": "a", "y": "all"}}


def test_a_child_listed_twice_under_one_parent_is_one_edge():
    assert variables("[p:children]\nk\nk\n[k]\nn0\n[p:vars]\nv=p\n") == {"n0": {"v": "p"}}


# --- parse_inventory: refusals ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("[g\nn0", ("unclosed section header '[g'", None, at(1))),
        ("n0\n[g:oops]\nn1", ("unknown section kind ':oops'", SECTION_HINT, at(2))),
        ("[a:b:vars]\nx=1", ("unknown section kind ':b:vars'", SECTION_HINT, at(1))),
        ("\n[g]\nn0 x='open", ("cannot split the line: No closing quotation", None, at(3))),
        ("[g]\nn0 x=\\", ("cannot split the line: No escaped character", None, at(2))),
        ("[g:vars]\nx=1\nnovalue", ("expected key=value, found 'novalue'", None, at(3))),
        ("[g]\nn0 broken", ("expected key=value, found 'broken'", "Host variables are written key=value.", at(2))),
        ("[g]\nn0\nn[3:1]", ("host range n[3:1] runs backwards", None, at(3))),
        ("[p:children]\n" + "c" * 254, ("a child group is longer than 253 characters or spans lines", None, at(2))),
        ("[g]\n;c\nn0\n../x", ("host name '../x' is not a plain host name", HOST_HINT, at(4))),
        ("[g]\n''", ("host name '' is not a plain host name", HOST_HINT, at(2))),
        ("[g]\na/" + "b" * 100, (f"host name {'a/' + 'b' * 78!r} is not a plain host name", HOST_HINT, at(2))),
        ("[g]\na:b", ("ansible_host='a:b' of a:b is neither an IP address nor a DNS host name", ADDRESS_HINT, at(2))),
        ("[g]\nn0\nn1 ansible_host=fe80::1%eth0",
         ("ansible_host='fe80::1%eth0' of n1 is neither an IP address nor a DNS host name", ADDRESS_HINT, at(3))),
        ("[g]\n" + "m" * 90 + " ansible_host=$(" + "r" * 90 + ")",
         (f"ansible_host={'$(' + 'r' * 78!r} of {'m' * 80} is neither an IP address nor a DNS host name", ADDRESS_HINT,
          at(2))),
        ("", (f"no hosts in {F}", "List one host per line under a [group] header.", at())),
        ("# only\n[g:vars]\nx=1\n[g:children]\nk", (f"no hosts in {F}", "List one host per line under a [group] header.", at())),
    ],
)  # fmt: skip
def test_inventory_refusals_words_hint_and_place(text, expected):
    assert said(refusal(text)) == expected


def test_a_comment_line_is_skipped_whatever_follows_its_mark():
    assert [h.name for h in parse_inventory("#\n;\n# x y\n; x y\n;n1\n[g]\nn0 # c\n", P).hosts] == ["n0"]


def test_a_name_of_253_characters_is_read():
    name = "c" * 253
    assert variables(f"[p:children]\n{name}\n[{name}]\nn0\n[{name}:vars]\nv=1\n") == {"n0": {"v": "1"}}
    assert [h.name for h in parse_inventory(f"[g]\n{'n' * 253} ansible_host=192.0.2.1\n", P).hosts] == ["n" * 253]


def test_a_vars_line_whose_value_alone_has_an_unclosed_quote_is_bad_input():
    """`'a=b'` splits as one word, but its value `b'` alone does not (was a ValueError: exit 3)."""
    e = refusal("[g:vars]\n'a=b'\n[g]\nn0\n")
    assert (e.message, e.where) == ("cannot split the value of 'a: No closing quotation", at(2))
    # a long key is cut at 60 characters in the message
    e = refusal(f"[g:vars]\n'{'k' * 61}=b'\n[g]\nn0\n")
    assert e.message == f"cannot split the value of '{'k' * 59}: No closing quotation"


# --- parse_inventory: caps on both sides ------------------------------------------------------------------------------
def test_10000_hosts_in_40000_entries_are_read():
    text = IP + "".join(f"[g{i}]\nn[1:10000]\n" for i in range(4))
    hosts = parse_inventory(text, P).hosts
    assert len(hosts) == 10_000 and (hosts[0].name, hosts[0].line, hosts[-1].name) == ("n1", 4, "n10000")


def test_one_host_entry_more_than_40000_is_refused():
    text = "".join(f"[g{i}]\nn[1:10000]\n" for i in range(4)) + "[g5]\nn1\n"
    assert said(refusal(text)) == (f"{F} lists more than 40000 host entries", None, at(10))
    text = "[g]\nn[1:10000]\nn[1:10000]\nn[1:10000]\nn[1:9999]\nn[1:2]\n"
    assert said(refusal(text)) == (f"{F} lists more than 40000 host entries", None, at(6))


def test_one_host_more_than_10000_is_refused_a_repeated_one_is_not():
    text = "[a]\nn[1:10000]\n[b]\nn1\nn10000\nm0\n"
    assert said(refusal(text)) == (f"{F} lists more than 10000 hosts", None, at(6))


def _groups(hosts: int, extra: str) -> str:
    return "".join(f"[g{i}]\nn{i}\n" for i in range(hosts)) + extra


def test_1024_groups_counting_vars_and_children_sections_are_read_and_one_more_refused():
    both = "[v:vars]\nx=1\n[c:children]\ng0\n"
    assert len(parse_inventory(_groups(1022, both), P).hosts) == 1022
    assert len(parse_inventory(_groups(1023, "[v:vars]\nx=1\n"), P).hosts) == 1023
    assert len(parse_inventory("u0\n" + _groups(1023, ""), P).hosts) == 1024  # "ungrouped" is a group
    for extra in ("[w:vars]\nx=1\n", "[d:children]\ng0\n", "[w]\nn9999\n"):
        assert said(refusal(_groups(1022, both + extra))) == (f"{F} has more than 1024 groups", None, at())
    assert said(refusal("u0\n" + _groups(1024, ""))) == (f"{F} has more than 1024 groups", None, at())


def test_1024_groups_named_only_as_children_are_read():
    kids = "[p:children]\n" + "".join(f"k{i}\n" for i in range(1023)) + "[k0]\nn0\n"
    assert [h.name for h in parse_inventory(kids, P).hosts] == ["n0"]


def test_a_1025th_group_named_only_as_a_child_is_refused():
    """The cap counts the groups named only as children too (it counted those with a section of their own:
    `[p:children]` with 5,000 new names was read, 5,001 groups in the graph the cap bounds)."""
    kids = "[p:children]\n" + "".join(f"k{i}\n" for i in range(1024)) + "[k0]\nn0\n"
    assert said(refusal(kids)) == (f"{F} has more than 1024 groups", None, at())


def test_16384_children_entries_are_read():
    kids = "[p:children]\n" + "".join(f"k{i % 8}\n" for i in range(16 * 1024)) + "[k0]\nn0\n"
    assert [h.name for h in parse_inventory(kids, P).hosts] == ["n0"]


def test_one_children_entry_more_than_16384_is_refused():
    kids = "[p:children]\n" + "".join(f"k{i % 8}\n" for i in range(16 * 1024 + 1)) + "[k0]\nn0\n"
    assert said(refusal(kids)) == (f"{F} has more than 16384 [group:children] entries", None, at(16 * 1024 + 2))


# --- _walk_order: a cycle ---------------------------------------------------------------------------------------------
CYCLE_HINT = "A group cannot be its own descendant in [group:children]."


def test_a_cycle_names_at_most_8_of_its_groups_in_order_and_not_the_groups_above_it():
    ring = "".join(f"[g{i}:children]\ng{(i + 1) % 10}\n" for i in range(10))
    e = refusal("[a:children]\ng0\n" + ring + "[a]\nn0\n")
    assert said(e) == (f"{F}: the groups g0, g1, g2, g3, g4, g5, g6, g7 are children of each other (a cycle)", CYCLE_HINT, at())


@pytest.mark.parametrize(
    ("text", "stuck"),
    [("[a:children]\na\n[a]\nn0\n", "a"), ("[a:children]\nb\n[b:children]\na\n[c:children]\na\n[c]\nn0\n", "a, b")],
)
def test_a_group_its_own_descendant_is_refused(text, stuck):
    assert said(refusal(text)) == (f"{F}: the groups {stuck} are children of each other (a cycle)", CYCLE_HINT, at())


# --- read_inventory ---------------------------------------------------------------------------------------------------
def test_read_inventory_reads_a_file_named_by_a_string_and_names_it(tmp_path):
    path = tmp_path / "hosts.ini"
    path.write_text("[g]\nn0 ansible_host=192.0.2.1\n")
    inv = read_inventory(str(path))
    assert inv.path == path and [(h.name, h.line, h.address) for h in inv.hosts] == [("n0", 2, "192.0.2.1")]
    path.write_text("[g]\nn0 x\n")
    with pytest.raises(BadInput) as info:
        read_inventory(path)
    assert info.value.where == Where(str(path), 2)


# --- hccn.conf --------------------------------------------------------------------------------------------------------
CONF = """# address_9=192.0.2.9
foo
gateway_0=not an address
unknown_1=x
address_3 = 10.0.0.3
netmask_3=255.255.0.0
address_0=10.0.0.1
netmask_5=255.255.255.0

ip_rule_64=anything
address_64=fe80::1
address_7=10.0.0.7
address_7=10.0.0.77
"""


def test_hccn_conf_devices_in_id_order_with_address_and_netmask():
    devices = parse_hccn_conf(CONF, "c.conf")
    assert list(devices) == [0, 3, 5, 7, 64]
    assert devices == {
        0: HccnDevice(0, "10.0.0.1", None),
        3: HccnDevice(3, "10.0.0.3", "255.255.0.0"),
        5: HccnDevice(5, None, "255.255.255.0"),
        7: HccnDevice(7, "10.0.0.77", None),
        64: HccnDevice(64, "fe80::1", None),
    }
    assert devices[3].network == ipaddress.ip_network("10.0.0.0/16")
    assert (devices[0].network, devices[5].network) == (None, None)
    assert parse_hccn_conf("", "c.conf") == {} and parse_hccn_conf("foo\n#x\n\n", "c.conf") == {}


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("address_0=10.0.0.1\naddress_1=10.0.0.999",
         ("address_1='10.0.0.999' is not an IP address", HCCN_HINT, Where("c.conf", 2, "address_1"))),
        ("netmask_2 = fe80::1%eth0",
         ("netmask_2='fe80::1%eth0' is not an IP address (no scope id)", HCCN_HINT, Where("c.conf", 1, "netmask_2"))),
        ("address_0=10.0.0.1=x", ("address_0='10.0.0.1=x' is not an IP address", HCCN_HINT, Where("c.conf", 1, "address_0"))),
        ("address_65=10.0.0.1",
         ("the device id of address_65=65 is out of range", DEVICE_HINT, Where("c.conf", 1, "address_65"))),
        ("x\ngateway_65=x", ("the device id of gateway_65=65 is out of range", DEVICE_HINT, Where("c.conf", 2, "gateway_65"))),
        ("route_" + "7" * 70 + "=x",
         (f"the device id of {'route_' + '7' * 54}={'7' * 40 + '...'!r} is not a whole number of at most 2 digits",
          DEVICE_HINT, Where("c.conf", 1, "route_" + "7" * 70))),
    ],
)  # fmt: skip
def test_hccn_conf_refusals_words_hint_and_place(text, expected):
    with pytest.raises(BadInput) as info:
        parse_hccn_conf(text, "c.conf")
    assert said(info.value) == expected


def test_read_hccn_conf_names_the_file(tmp_path):
    path = tmp_path / "c.conf"
    path.write_text("address_0=10.0.0.1\nnetmask_0=255.255.255.0\n")
    assert read_hccn_conf(path) == {0: HccnDevice(0, "10.0.0.1", "255.255.255.0")}
    path.write_text("address_0=10.0.0.1\naddress_1=x\n")
    with pytest.raises(BadInput) as info:
        read_hccn_conf(str(path))
    assert said(info.value) == ("address_1='x' is not an IP address", HCCN_HINT, Where(str(path), 2, "address_1"))
