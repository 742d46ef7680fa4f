"""The multi-host inputs as a hostile user writes them: inventories, hccn.conf, launch variables, sizes.

Property tests (hypothesis, derandomized) feed generated text to each parser of the bounded-input layer and to
`envkit launch render`: every input ends in a value or a BadInput (exit 2) within a time bound, never another
exception (exit 3). Each limit is tested on both sides of its boundary.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from envkit.errors import BadInput
from envkit.fleet.inventory import parse_hccn_conf, parse_inventory
from envkit.io import bounded
from tests.hostile.bounds import SETTINGS, bounded_call

DIGITS = st.text(alphabet="0123456789²٣８_ -+.e", max_size=6000)
_bounded = bounded_call


@SETTINGS
@given(DIGITS)
def test_integers_are_ascii_digits_in_range_or_bad_input(text):
    value = _bounded(bounded.integer, text, "n", lo=0, hi=65535)
    if value is not None:
        assert text.isascii() and text.isdigit() and 0 <= value <= 65535 and len(text) <= 5


@pytest.mark.parametrize(
    ("text", "ok"),
    [("1", True), ("65535", True), ("65536", False), ("0", False), ("00080", True), ("000080", False), ("²", False),
     ("８０", False), ("8_0", False), (" 80", False), ("+80", False), ("9" * 5000, False)],
)  # fmt: skip
def test_port_on_both_sides_of_its_bounds(text, ok):
    assert (_bounded(bounded.port, text, "port") is not None) == ok


@pytest.mark.parametrize(
    ("text", "ok"),
    [("1G", True), ("1025M", False), ("1024M", True), ("8K", True), ("1" * 19, False), ("1" * 20, False), ("1 Ki", False)],
)
def test_size_on_both_sides_of_its_cap(text, ok):
    assert (_bounded(bounded.size, text, "--max-size", hi=1 << 30) is not None) == ok


@pytest.mark.parametrize(
    ("text", "family", "ok"),
    [("10.0.0.1", 4, True), ("10.0.0.1", 6, False), ("fe80::1", 6, True), ("fe80::1%eth0", None, False),
     ("fe80::1%$(reboot)", None, False), ("::ffff:255.255.255.255", None, True), ("1" * 46, None, False)],
)  # fmt: skip
def test_addresses_of_one_family_without_scope_id(text, family, ok):
    assert (_bounded(bounded.address, text, "ip", family=family) is not None) == ok


@pytest.mark.parametrize(
    ("name", "count"),
    [("n[0:9999]", 10_000), ("n[0:10000]", None), ("n[0:99999999]", None), ("r[1:100]n[1:100]", 10_000),
     ("r[1:101]n[1:100]", None), ("n[" + "9" * 4400 + ":1]", None), ("n[01:03]", 3), ("n[3:1]", None)],
)  # fmt: skip
def test_host_ranges_are_counted_before_they_are_made(name, count):
    names = _bounded(bounded.host_range, name, limit=1.0)
    assert (None if names is None else len(names)) == count


def test_host_range_padding_and_order():
    assert bounded.host_range("n[08:10]-d[0:1]") == ["n08-d0", "n08-d1", "n09-d0", "n09-d1", "n10-d0", "n10-d1"]


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.sampled_from(["[g]", "[g:vars]", "[g:children]", "[all:vars]", "[x:children]", "[bad", "[g:oops]"]),
            st.from_regex(r"[a-z]{1,3}(\[[0-9]{1,6}:[0-9]{1,6}\])?( [a-z_]{1,12}=[a-z0-9.:%$]{0,12}){0,2}", fullmatch=True),
            st.text(max_size=40),
        ),
        max_size=40,
    )
)
def test_generated_inventories_parse_or_are_bad_input(lines):
    _bounded(parse_inventory, "\n".join(lines), Path("hosts.ini"), limit=5.0)


def test_a_wide_group_dag_is_walked_once(tmp_path):
    """20 layers of 20 groups, each child of every group above: 20^19 paths, one walk (was exponential)."""
    layers = [[f"l{i}g{j}" for j in range(20)] for i in range(20)]
    text = ["[l19g0]", "node1"]
    for upper, lower in zip(layers, layers[1:], strict=False):
        for parent in upper:
            text += [f"[{parent}:children]", *lower]
    text += ["[l0g0:vars]", "x=top", "[l19g0:vars]", "x=bottom"]
    inv = _bounded(parse_inventory, "\n".join(text), tmp_path / "i.ini", limit=5.0)
    assert inv is not None and inv.hosts[0].vars["x"] == "bottom"  # the deepest group's variable wins


@pytest.mark.parametrize(
    ("text", "message"),
    [("[a:children]\nb\n[b:children]\na\n[a]\nn0\n", "a cycle"), ("[a:children]\na\n[a]\nn0\n", "a cycle")],
)
def test_group_cycles_are_refused(tmp_path, text, message):
    with pytest.raises(BadInput, match=message):
        parse_inventory(text, tmp_path / "i.ini")


def test_group_and_host_caps_on_both_sides(tmp_path):
    groups = "\n".join(f"[g{i}]\nn{i}" for i in range(1024))
    assert len(parse_inventory(groups, tmp_path / "i.ini").hosts) == 1024
    with pytest.raises(BadInput, match="more than 1024 groups"):
        parse_inventory(groups + "\n[g1024]\nn1024", tmp_path / "i.ini")
    assert len(parse_inventory("[a]\nn[1:10000]", tmp_path / "i.ini").hosts) == 10_000
    with pytest.raises(BadInput, match="more than 10000 hosts"):
        parse_inventory("[a]\nn[1:10000]\n[b]\nm0", tmp_path / "i.ini")


@SETTINGS
@given(
    st.lists(
        st.one_of(
            st.from_regex(r"(address|netmask)_[0-9]{1,70}=[0-9a-f.:%]{0,50}", fullmatch=True),
            st.text(max_size=60),
        ),
        max_size=30,
    )
)
def test_generated_hccn_conf_parses_or_is_bad_input(lines):
    devices = _bounded(parse_hccn_conf, "\n".join(lines), "hccn.conf")
    if devices is not None:
        assert all(0 <= d <= bounded.MAX_DEVICE_ID for d in devices)
        assert all("%" not in (v.address or "") for v in devices.values())


@pytest.mark.parametrize(("dev", "ok"), [("64", True), ("65", False), ("9" * 5000, False)])
def test_hccn_device_ids_on_both_sides(dev, ok):
    conf = f"address_{dev}=10.0.0.1\n"
    assert (_bounded(parse_hccn_conf, conf, "hccn.conf") is not None) == ok


def test_a_key_with_other_digits_is_no_device_key():
    assert parse_hccn_conf("address_٣=10.0.0.1\n", "hccn.conf") == {}  # not address_N: ignored, as unknown keys


def test_a_hccn_conf_of_60000_devices_is_refused_fast():
    text = "".join(f"address_{i}=10.{i // 65536 % 256}.{i // 256 % 256}.{i % 256}\n" for i in range(60_000))
    assert _bounded(parse_hccn_conf, text, "hccn.conf", limit=2.0) is None


@pytest.mark.parametrize(
    ("script", "ok"),
    [("train.py", True), ("/opt/job/run_clm.py", True), ("--nnodes=9", False), ("-x.py", False), ("../x.py", False),
     ("a b.py", False), ("run.py;reboot", False), ("x" * 1025, False)],
)  # fmt: skip
def test_the_training_script_cannot_become_a_torchrun_option(script, ok):
    from envkit.errors import Where
    from envkit.export.launch import train_script

    assert (_bounded(train_script, script, Where("hosts.ini", 1)) is not None) == ok


@pytest.mark.parametrize(
    "var",
    ["envkit_master_port=²", "envkit_master_port=" + "9" * 5000, "envkit_device_port=٣", "envkit_devices=0,٣",
     "envkit_devices=" + ",".join(str(i) for i in range(66)), "envkit_train_script=--standalone", "host:ansible_host=fe80::1%x"],
)  # fmt: skip
def test_launch_render_refuses_each_hostile_variable_with_exit_2(tmp_path, run_cli, var):
    """Through the command: exit 2 naming the inventory, never a traceback (exit 3)."""
    import shutil

    from tests.launch.conftest import HCCN, resolve_lock

    shutil.copy(HCCN / "a2_node0.hccn.conf", tmp_path / "c.conf")
    inv = tmp_path / "hosts.ini"
    host = var.removeprefix("host:") if var.startswith("host:") else "ansible_host=192.0.2.1"
    group = "" if var.startswith("host:") else var
    inv.write_text(f"[a]\nn0 {host} envkit_hccn_conf=c.conf\n[a:vars]\n{group}\n")
    lock = resolve_lock("910b", tmp_path / "910b.lock")
    r = run_cli("launch", "render", "-i", str(inv), "--lock", str(lock), "-o", str(tmp_path / "o"))
    assert r.code == 2, (var, r.err)
    assert "hosts.ini" in r.err and "Traceback" not in r.err and "internal error" not in r.err
    assert not (tmp_path / "o").exists()


@pytest.mark.parametrize("target", ["inventory", "hccn.conf"])
@pytest.mark.parametrize("kind", ["fifo", "/dev/zero", "folder"])
def test_an_inventory_or_hccn_conf_that_is_no_regular_file_is_refused_unopened(tmp_path, run_cli, target, kind):
    """A FIFO would block `open` forever, /dev/zero never ends: refused from their stat, exit 2, within a second."""
    import os

    from tests.launch.conftest import resolve_lock

    inv, conf = tmp_path / "hosts.ini", tmp_path / "c.conf"
    bad = inv if target == "inventory" else conf
    good_inv = "[a]\nn0 ansible_host=192.0.2.1 envkit_hccn_conf=c.conf\n"
    if target != "inventory":
        inv.write_text(good_inv)
    if kind == "fifo":
        os.mkfifo(bad)
    elif kind == "folder":
        bad.mkdir()
    else:
        bad.symlink_to("/dev/zero")
    lock = resolve_lock("910b", tmp_path / "910b.lock")
    start = time.monotonic()
    r = run_cli("launch", "render", "-i", str(inv), "--lock", str(lock), "-o", str(tmp_path / "o"))
    assert time.monotonic() - start < 5
    assert r.code == 2 and "not a regular file" in r.err and str(bad) in r.err, r.err


@pytest.mark.parametrize(
    ("size", "ok"), [("16G", True), ("16385M", False), ("9" * 5000, False), ("1" * 19, False), ("８K", False)]
)
def test_max_size_on_both_sides_of_its_cap(size, ok):
    from envkit.executor.collectives import MAX_SIZE, parse_size

    assert MAX_SIZE == 16 << 30
    assert (_bounded(parse_size, size) is not None) == ok


@pytest.mark.parametrize(
    "argv",
    [["smoke", "--device", "cpu", "--collectives", "--nproc", "2"], ["launch", "profile", "-i", "hosts.ini", "--nproc", "1"]],
)
def test_a_5000_digit_max_size_is_exit_2_through_the_commands(tmp_path, run_cli, monkeypatch, argv):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "hosts.ini").write_text("[a]\nn0 ansible_host=192.0.2.1\nn1 ansible_host=192.0.2.2\n")
    r = run_cli(*argv, "--max-size", "9" * 5000, "-o" if argv[0] == "launch" else "--out", str(tmp_path / "o"))
    assert r.code == 2 and "--max-size" in r.err and "internal error" not in r.err, r.err


def test_host_entries_and_children_caps_on_both_sides(tmp_path):
    """Repeated memberships count: 40,000 host entries are read, one more is refused; likewise 16,384 children."""
    from envkit.fleet.inventory import MAX_GROUPS

    four = "".join(f"[g{i}]\nn[1:10000]\n" for i in range(4))
    assert len(parse_inventory(four, tmp_path / "i.ini").hosts) == 10_000
    with pytest.raises(BadInput, match="more than 40000 host entries"):
        parse_inventory(four + "[g5]\nn1\n", tmp_path / "i.ini")
    edges = 16 * MAX_GROUPS
    kids = "[p:children]\n" + "".join(f"k{i % 8}\n" for i in range(edges)) + "[k0]\nn0\n"
    assert [h.name for h in parse_inventory(kids, tmp_path / "i.ini").hosts] == ["n0"]
    with pytest.raises(BadInput, match=f"more than {edges}"):
        parse_inventory(kids.replace("[k0]", "k0\n[k0]", 1), tmp_path / "i.ini")


def test_an_inventory_file_at_its_size_cap_is_read_and_one_byte_more_refused(tmp_path):
    from envkit.fleet.inventory import INVENTORY, read_inventory

    head = "[a]\nn0 ansible_host=192.0.2.1\n"
    path = tmp_path / "hosts.ini"
    path.write_text(head + "#" * (INVENTORY.max_bytes - len(head) - 1) + "\n")
    assert path.stat().st_size == INVENTORY.max_bytes and read_inventory(path).hosts[0].name == "n0"
    path.write_text(head + "#" * (INVENTORY.max_bytes - len(head)) + "\n")
    with pytest.raises(BadInput, match="too large for an inventory"):
        read_inventory(path)
