"""envkit/fleet/hccn.py, pinned for `make mutation MODULES=fleet`: each hccn_tool parser on the recorded vendor
outputs (tests/fixtures/hccn) and on one match, none, two, other letter case, bytes and the MAX_CHARS cut; every
finding's whole rule, status, message, device, host and source; the TLS and IP-plan rules on both sides; the peers'
refusals; `check_net`'s assembly of a probe; the probe facts a (possibly hostile) host reports; the summary cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.errors import BadInput
from envkit.fleet import hccn as H
from envkit.fleet.data import cite, load_hccl
from envkit.io.evidence import Evidence
from envkit.verdict import Verdict

F = Path(__file__).resolve().parents[1] / "fixtures" / "hccn"
SRC = H.SOURCE_CHECKS
IP_SRC = "hicann/hccl rank_table_config_a2.md (device_ip is address_N); error EI0014"
TLS_SRC = "cann/hixl benchmarks README; hicann/hccl fault_diagnosis (EI0016)"
BUSY = "hccn_tool is busy; run the check again, one hccn_tool at a time"


def read(name: str) -> str:
    return (F / name).read_text()


def raw(name: str) -> bytes:
    return (F / name).read_bytes()


def fv(rule: str, status: str, message: str, device: int | None = None, host: str | None = None, source: str = SRC) -> Verdict:
    return Verdict(rule=rule, status=status, message=message, device=device, host=host, source=source)  # type: ignore[arg-type]


def refusal(fn, *args, **kwargs) -> BadInput:
    with pytest.raises(BadInput) as info:
        fn(*args, **kwargs)
    return info.value


def test_source_of_the_checks():
    assert SRC == "vllm-project/vllm-ascend docs installation.md (multi-node checks); Ascend/mind-cluster fault guide"
    assert H.MAX_CHARS == 65536


# --- hccn_conf_addresses -----------------------------------------------------------------------------


def test_hccn_conf_addresses_of_the_recorded_conf():
    assert H.hccn_conf_addresses(raw("a2_node1.hccn.conf")) == {d: f"10.20.1.{10 + d}" for d in range(8)}


def test_hccn_conf_addresses_skip_bad_lines_and_keep_reading():
    data = (
        b"address_0=fe80::1%eth0\n"  # a scope id: left out, the next lines still read
        b"address_1=10.0.0.999\n"
        b"  address_2 =\t10.0.0.2  \n"
        b"address_1000=10.0.0.3\n"  # 4 digits
        b"Address_4=10.0.0.4\n"  # the key is case-sensitive
        b"netmask_5=255.0.0.0\n"
        b"address_6=10.0.0.6 x\n"
        b"\xff\xfeaddress_7=10.0.0.7\n"
        b"address_8=\xff\n"  # undecodable: replaced, so no address
        b"address_9=fe80::9\n"
        b"address_999=10.0.0.99\n"
    )
    assert H.hccn_conf_addresses(data) == {2: "10.0.0.2", 9: "fe80::9", 999: "10.0.0.99"}


@pytest.mark.parametrize("data", [None, b"", b"\n\n"])
def test_hccn_conf_addresses_of_nothing(data):
    assert H.hccn_conf_addresses(data) == {}


# --- finding_dict, _text, excerpt ---------------------------------------------------------------------


def test_finding_dict_names_every_field():
    f = fv("link", "warn", "m", device=3, host="n0", source="s")
    assert H.finding_dict(f) == {"check": "link", "status": "warn", "message": "m", "device": 3, "host": "n0", "source": "s"}
    assert list(H.finding_dict(f)) == ["check", "status", "message", "device", "host", "source"]


def test_text_of_none_str_bytes_and_its_cut():
    assert H._text(None) == "" and H._text("") == ""
    assert H._text(b"a\xffb") == "a\ufffdb" and H._text("a\xffb") == "a\xffb"
    assert H._text("x" * 65537) == "x" * 65536 and H._text(b"y" * 65536) == "y" * 65536


def test_excerpt_is_one_printable_line_of_at_most_120_characters():
    assert H.excerpt(None) == "" and H.excerpt(b"") == ""
    assert H.excerpt("a\tb\nc\x00d\r\ne\x1b") == "a?b | c?d? | e?"
    assert H.excerpt(b"\xffok") == "\ufffdok"
    assert H.excerpt("x" * 120) == "x" * 120
    assert H.excerpt("x" * 121) == "x" * 120 + "..."
    assert H.excerpt("x" * 11, 10) == "x" * 10 + "..." and H.excerpt("x" * 10, 10) == "x" * 10
    assert H.excerpt("a\nb", 3) == "a |..."  # the cut comes after the line breaks are shown


# --- parsers ------------------------------------------------------------------------------------------


def test_parse_link_recorded_and_variants():
    assert H.parse_link(read("link_up.txt")) == "UP" and H.parse_link(raw("link_down.txt")) == "DOWN"
    assert H.parse_link("LINK STATUS : up\n") == "UP" and H.parse_link("  link status:Down  ") == "DOWN"
    assert H.parse_link("noise\nlink status: UP\nmore noise\n") == "UP"
    assert H.parse_link(raw("garbled_link.bin")) == "DOWN"  # the garbled first line is no status line


@pytest.mark.parametrize(
    "out",
    [None, "", b"", "link status: UP\nlink status: UP\n", "link status: UP\nlink status: DOWN\n", "link status: MAYBE",
     "link status: UP now", "link status:", raw("busy.txt"), "status: UP"],
)  # fmt: skip
def test_parse_link_none_unless_exactly_one_up_or_down_line(out):
    assert H.parse_link(out) is None


def test_parse_link_reads_only_the_first_max_chars():
    line = "\nlink status: UP"
    assert H.parse_link("x" * (65536 - len(line)) + line) == "UP"
    assert H.parse_link("x" * (65537 - len(line)) + line) is None  # cut to "link status: U"
    assert H.parse_link(b"x" * (65537 - len(line)) + line.encode()) is None


def test_parse_net_health_recorded_and_every_state_in_any_case():
    assert H.parse_net_health(read("net_health_success.txt")) == "Success"
    assert H.parse_net_health(raw("net_health_init.txt")) == "Init"
    assert H.parse_net_health(read("net_health_fault.txt")) == "Fault"
    for state in H.HEALTH_STATES:
        assert H.parse_net_health(f"net health status: {state.upper()}\n") == state
        assert H.parse_net_health(f"NET HEALTH STATUS : {state.lower()}  ") == state


@pytest.mark.parametrize(
    "out",
    [None, "", "net health status: Bogus", "net health status: Socket  fail", "net health status: Success\nnet health status: Success",
     "net health status: 5", "health status: Success"],
)  # fmt: skip
def test_parse_net_health_none(out):
    assert H.parse_net_health(out) is None


def test_health_states_are_the_vendors_codes_in_order():
    assert H.HEALTH_STATES == ("Success", "Socket fail", "Receive timeout", "Unreachable", "Time exceeded", "Fault", "Init",
                               "Thread error", "Detect ip set")  # fmt: skip


def test_parse_tls():
    assert H.parse_tls(read("tls.txt")) == 0 and H.parse_tls(raw("tls_enabled.txt")) == 1
    assert H.parse_tls("TLS SWITCH[1]\ntls switch[1]") == 1  # the same value twice is one value
    assert H.parse_tls("tls switch[255]") == 255


@pytest.mark.parametrize("out", [None, "", "tls switch[0]\ntls switch[1]", "tls switch[1000]", "tls switch[]", "tls switch [1]"])
def test_parse_tls_none(out):
    assert H.parse_tls(out) is None


def test_parse_ip():
    assert H.parse_ip(read("ip.txt")) == ("10.20.0.10", "255.255.255.0")
    assert H.parse_ip(b"IPADDR : fe80::1\nNETMASK: 64\n") == ("fe80::1", "64")
    assert H.parse_ip("ipaddr:10.0.0.1\nnetmask:24") == ("10.0.0.1", "24")


@pytest.mark.parametrize(
    "out",
    [None, "", read("garbled_ip.txt"), "netmask:255.0.0.0", "ipaddr:10.0.0.1", "ipaddr:10.0.0.1\nipaddr:10.0.0.2\nnetmask:24",
     "ipaddr:10.0.0.1\nnetmask:24\nnetmask:24", "ipaddr:fe80::1%eth0\nnetmask:64", "ipaddr:10.0.0.1\nnetmask:banana",
     "ipaddr:10.0.0.1\nnetmask:33"],
)  # fmt: skip
def test_parse_ip_none(out):
    assert H.parse_ip(out) is None


def test_parse_ping_recorded():
    assert H.parse_ping(read("ping_ok.txt")) == H.Ping(3, 3, 0.0)
    assert H.parse_ping(raw("ping_loss.txt")) == H.Ping(3, 2, 33.33)
    assert H.parse_ping(read("ping_fail.txt")) == H.Ping(3, 0, 100.0)
    assert H.parse_ping("10 Packets Transmitted, 7 received, 30% packet loss") == H.Ping(10, 7, 30.0)


@pytest.mark.parametrize(
    "out",
    [None, "", read("ping_ok.txt") + read("ping_ok.txt"), "3 packets transmitted, 3 received", "x packets transmitted, 3 received, 0% packet loss"],
)  # fmt: skip
def test_parse_ping_none(out):
    assert H.parse_ping(out) is None


# --- _unreadable ----------------------------------------------------------------------------------------


def test_unreadable_no_output_busy_or_garbled():
    assert H._unreadable("tls", None, 3, "n0") == fv("tls", "fail", "hccn_tool gave no output for tls", 3, "n0")
    assert H._unreadable("ip", " \n\t", 0, None) == fv("ip", "fail", "hccn_tool gave no output for ip", 0)
    assert H._unreadable("ip", b"", None, "h") == fv("ip", "fail", "hccn_tool gave no output for ip", None, "h")
    assert H._unreadable("link", raw("busy.txt"), 1, "n1") == fv("link", "warn", BUSY, 1, "n1")
    assert H._unreadable("link", "x\nHCCN_TOOL IS BUSY", 1, None) == fv("link", "warn", BUSY, 1)
    assert H._unreadable("link", raw("garbled_link.bin"), 2, "n2") == fv(
        "link", "fail", "unreadable hccn_tool link output: '?[31mlink status: \ufffd\ufffdUP?? | link status: DOWN | '", 2, "n2"
    )
    assert H._unreadable("ping 10.0.0.1", "x" * 200, 4, None) == fv(
        "ping 10.0.0.1", "fail", f"unreadable hccn_tool ping 10.0.0.1 output: '{'x' * 120}...'", 4
    )


# --- check_device ----------------------------------------------------------------------------------------


def test_check_device_healthy_with_every_ping_outcome():
    out = H.DeviceOutputs(
        5,
        link=raw("link_up.txt"),
        net_health=read("net_health_success.txt"),
        tls=read("tls.txt"),
        ip="ipaddr:10.0.0.5\nnetmask:255.255.0.0\n",
        ping={
            "10.0.0.9": read("ping_ok.txt"),
            "10.0.0.1": read("ping_fail.txt"),
            "10.0.0.3": raw("ping_loss.txt"),
            "10.0.0.2": "garbage",
            "10.0.0.4": "3 packets transmitted, 1 received, 66.666% packet loss",
            "10.0.0.5": "0 packets transmitted, 0 received, 0% packet loss",
            "10.0.0.6": "3 packets transmitted, 4 received, 0% packet loss",
        },
    )
    findings, facts = H.check_device(out, "10.0.0.5", "n0")
    assert facts == {"link": "UP", "net_health": "Success", "tls": 0, "ip": "10.0.0.5", "netmask": "255.255.0.0"}
    assert findings == [
        fv("link", "ok", "link status UP", 5, "n0"),
        fv("net_health", "ok", "net health Success", 5, "n0"),
        fv("ip", "ok", "device ip 10.0.0.5 matches /etc/hccn.conf address_5=10.0.0.5", 5, "n0", IP_SRC),
        fv("ping 10.0.0.1", "fail", "10.0.0.1 unreachable (3 sent, none received)", 5, "n0"),
        fv("ping 10.0.0.2", "fail", "unreadable hccn_tool ping 10.0.0.2 output: 'garbage'", 5, "n0"),
        fv("ping 10.0.0.3", "warn", "10.0.0.3: 33.33% packet loss", 5, "n0"),
        fv("ping 10.0.0.4", "warn", "10.0.0.4: 66.67% packet loss", 5, "n0"),
        fv("ping 10.0.0.5", "fail", "10.0.0.5 unreachable (0 sent, none received)", 5, "n0"),
        fv("ping 10.0.0.6", "ok", "10.0.0.6 reachable", 5, "n0"),
        fv("ping 10.0.0.9", "ok", "10.0.0.9 reachable", 5, "n0"),
    ]


def test_check_device_down_init_tls_on_and_a_different_ip():
    out = H.DeviceOutputs(
        0, link=read("link_down.txt"), net_health=read("net_health_init.txt"), tls=read("tls_enabled.txt"), ip=read("ip.txt")
    )
    findings, facts = H.check_device(out, hccn_address="10.20.0.11")
    assert facts == {"link": "DOWN", "net_health": "Init", "tls": 1, "ip": "10.20.0.10", "netmask": "255.255.255.0"}
    assert findings == [
        fv("link", "fail", "link status DOWN: must be UP", 0),
        fv("net_health", "warn", "net health Init: must be Success", 0),
        fv("ip", "fail", "device ip 10.20.0.10 differs from /etc/hccn.conf address_0=10.20.0.11", 0, None, IP_SRC),
    ]


def test_check_device_a_fault_is_a_failure_and_no_hccn_address_no_ip_finding():
    out = H.DeviceOutputs(
        7, link="link status: UP", net_health=raw("net_health_fault.txt"), tls="tls switch[0]", ip=raw("ip.txt")
    )
    findings, facts = H.check_device(out, host="h")
    assert facts == {"link": "UP", "net_health": "Fault", "tls": 0, "ip": "10.20.0.10", "netmask": "255.255.255.0"}
    assert findings == [
        fv("link", "ok", "link status UP", 7, "h"),
        fv("net_health", "fail", "net health Fault: must be Success", 7, "h"),
    ]


def test_check_device_with_no_output_at_all():
    findings, facts = H.check_device(H.DeviceOutputs(2), "10.0.0.2", "n")
    assert facts == {}
    assert findings == [
        fv("link", "fail", "hccn_tool gave no output for link", 2, "n"),
        fv("net_health", "fail", "hccn_tool gave no output for net_health", 2, "n"),
        fv("tls", "fail", "hccn_tool gave no output for tls", 2, "n"),
        fv("ip", "fail", "hccn_tool gave no output for ip", 2, "n"),
    ]


def test_check_device_busy_outputs_are_warnings_each():
    busy = raw("busy.txt")
    findings, facts = H.check_device(H.DeviceOutputs(1, busy, busy, busy, busy, {"10.0.0.1": busy}))
    assert facts == {}
    assert findings == [fv(rule, "warn", BUSY, 1) for rule in ("link", "net_health", "tls", "ip", "ping 10.0.0.1")]


# --- check_tls_consistent ----------------------------------------------------------------------------------


def test_tls_consistent():
    assert H.check_tls_consistent({}) == fv("tls", "ok", "TLS switch - on all 0 devices", source=TLS_SRC)
    assert H.check_tls_consistent({("a", 0): 1}) == fv("tls", "ok", "TLS switch 1 on all 1 devices", source=TLS_SRC)
    assert H.check_tls_consistent({("a", 0): 0, ("b", 1): 0, ("b", 2): 0}) == fv(
        "tls", "ok", "TLS switch 0 on all 3 devices", source=TLS_SRC
    )


def test_tls_inconsistent_names_the_devices_with_tls_on():
    mixed = {("b", 3): 1, ("a", 0): 0, ("a", 7): 1, ("a", 1): 0}
    assert H.check_tls_consistent(mixed) == fv(
        "tls", "fail", "TLS switch differs between devices (on: a:7, b:3); set one value everywhere", source=TLS_SRC
    )
    assert H.check_tls_consistent({("a", 0): 0, ("a", 1): 1, ("a", 2): 2}).message == (
        "TLS switch differs between devices (on: a:1, a:2); set one value everywhere"
    )


# --- check_ip_plan -----------------------------------------------------------------------------------------


def conf_addresses(name: str) -> dict[int, tuple[str, str]]:
    from envkit.fleet.inventory import read_hccn_conf

    return {d: (v.address, v.netmask) for d, v in read_hccn_conf(F / name).items()}  # type: ignore[misc]


def test_ip_plan_of_a_chip_without_one():
    assert H.check_ip_plan("310p", {0: ("10.0.0.1", "24")}, "n0") == [
        fv("ip_plan", "warn", "no IP plan is recorded for chip 310p; not checked", host="n0")
    ]


def test_ip_plan_a2_one_subnet():
    src = cite(load_hccl().ip_plan("910b"))
    assert src.endswith("(stated)")
    assert H.check_ip_plan("910b", conf_addresses("a2_node0.hccn.conf"), "n0") == [
        fv("ip_plan", "ok", "all 8 ports in 10.20.0.0/16", host="n0", source=src)
    ]
    two = {0: ("10.20.0.1", "255.255.255.0"), 1: ("10.20.1.1", "255.255.255.0"), 2: ("10.20.0.2", "255.255.255.0")}
    assert H.check_ip_plan("910b", two, "n1") == [
        fv(
            "ip_plan",
            "fail",
            "ports span 2 subnets (10.20.0.0/24, 10.20.1.0/24); on 910b all ports share one subnet",
            host="n1",
            source=src,
        )
    ]
    # no address at all (check_net never asks): no subnet is no one subnet
    assert H.check_ip_plan("910b", {}) == [
        fv("ip_plan", "fail", "ports span 0 subnets (); on 910b all ports share one subnet", source=src)
    ]


def test_ip_plan_a3_die_pairs_differ():
    src = cite(load_hccl().ip_plan("a3"))
    a3 = conf_addresses("a3_node0.hccn.conf")
    ok = fv("ip_plan", "ok", "the two dies of each NPU are in different subnets (16 devices)", host="h", source=src)
    assert H.check_ip_plan("a3", a3, "h") == [ok]
    a3[5] = ("10.30.0.15", "255.255.255.0")  # NPU 2's dies (devices 4 and 5) now share a subnet
    a3[1] = ("10.30.0.11", "255.255.255.0")  # and NPU 0's
    assert H.check_ip_plan("a3", a3, "h") == [
        fv("ip_plan", "fail", "devices 0 and 1 (the two dies of NPU 0) share subnet 10.30.0.0/24; they must differ", 0, "h", src),
        fv("ip_plan", "fail", "devices 4 and 5 (the two dies of NPU 2) share subnet 10.30.0.0/24; they must differ", 4, "h", src),
    ]


def test_ip_plan_a3_pairs_are_2k_and_2k_plus_1_only():
    src = cite(load_hccl().ip_plan("a3"))
    a, b = ("10.1.0.1", "255.255.255.0"), ("10.2.0.1", "255.255.255.0")
    # devices 1 and 2 share a subnet but are dies of different NPUs; a lone die has no pair
    assert H.check_ip_plan("a3", {0: a, 1: b, 2: b, 3: a, 6: a}) == [
        fv("ip_plan", "ok", "the two dies of each NPU are in different subnets (5 devices)", source=src)
    ]
    assert H.check_ip_plan("a3", {2: a, 3: a}) == [
        fv("ip_plan", "fail", "devices 2 and 3 (the two dies of NPU 1) share subnet 10.1.0.0/24; they must differ", 2, None, src)
    ]
    assert H.check_ip_plan("a3", {3: a, 4: a})[0].status == "ok"  # 3 and 4: two NPUs


# --- parse_peers, inventory_peers ------------------------------------------------------------------------


def test_parse_peers():
    assert H.parse_peers("10.0.0.1") == ["10.0.0.1"]
    assert H.parse_peers(" 10.0.0.1 ,, fe80::1, ") == ["10.0.0.1", "fe80::1"]
    assert H.parse_peers("") == [] and H.parse_peers(" , ") == []


def test_parse_peers_refusals():
    hint = "give the peers' device IPs (address_N of their /etc/hccn.conf), comma-separated"
    e = refusal(H.parse_peers, "10.0.0.1,-s")
    assert (e.message, e.hint, e.where) == ("--peers: '-s' is not an IP address (no IPv6 scope id)", hint, None)
    e = refusal(H.parse_peers, "fe80::1%eth0")
    assert e.message == "--peers: 'fe80::1%eth0' is not an IP address (no IPv6 scope id)"
    e = refusal(H.parse_peers, "1" * 61)
    assert e.message == f"--peers: {'1' * 60!r} is not an IP address (no IPv6 scope id)"
    e = refusal(H.parse_peers, "10.0.0.1\n10.0.0.2")
    assert (e.message, e.hint) == ("--peers is longer than 4096 characters or spans lines", None)


def test_inventory_peers_per_device_in_host_order(tmp_path):
    (tmp_path / "confs").mkdir()
    (tmp_path / "confs/b.conf").write_text("address_1=10.0.1.1\nnetmask_1=255.0.0.0\naddress_0=10.0.1.0\nnetmask_2=255.0.0.0\n")
    inv = tmp_path / "inv.ini"
    inv.write_text(
        "[a]\n"
        "first\n"  # no hccn.conf: skipped, the others still read
        f"n0 envkit_hccn_conf={F / 'a2_node0.hccn.conf'}\n"
        "n1 envkit_hccn_conf=confs/b.conf\n"
    )
    peers = H.inventory_peers(inv)
    assert peers == {
        **{d: [f"10.20.0.{10 + d}"] for d in range(8)},
        0: ["10.20.0.10", "10.0.1.0"],
        1: ["10.20.0.11", "10.0.1.1"],
    }
    assert H.inventory_peers(str(inv)) == peers


def test_inventory_peers_without_any_hccn_conf(tmp_path):
    inv = tmp_path / "inv.ini"
    inv.write_text("[a]\nn0 x=1\n")
    e = refusal(H.inventory_peers, inv)
    assert (e.message, e.hint) == (
        f"{inv}: no host sets envkit_hccn_conf, so no peer device IP is known",
        "set envkit_hccn_conf=PATH (a copy of the host's /etc/hccn.conf) per host, or give --peers",
    )
    (tmp_path / "empty.conf").write_text("netmask_0=255.0.0.0\n")  # a conf with no address is no peer either
    inv.write_text("[a]\nn0 envkit_hccn_conf=empty.conf\n")
    assert refusal(H.inventory_peers, inv).message == f"{inv}: no host sets envkit_hccn_conf, so no peer device IP is known"


# --- check_net -------------------------------------------------------------------------------------------


def probe(
    outputs=None, pings=None, errors=None, conf: bytes | None = None, tool: str | None = "/usr/bin/hccn_tool"
) -> H.NetProbe:
    ev = Evidence("/etc/hccn.conf", data=conf, error=None if conf is not None else "not found")
    return H.NetProbe(tool, "no hccn_tool on the host", ev, outputs or {}, pings or {}, errors or {})


def healthy(dev: int, ip: str, tls: str = "tls switch[0]", mask: str = "255.255.0.0") -> dict[str, bytes | None]:
    return {
        "link": raw("link_up.txt"),
        "net_health": raw("net_health_success.txt"),
        "tls": tls.encode(),
        "ip": f"ipaddr:{ip}\nnetmask:{mask}\n".encode(),
    }


def test_check_net_skipped():
    net = H.NetProbe(None, "no hccn_tool on the host", Evidence("/etc/hccn.conf"))
    assert H.check_net(net, "910b", "n0") == [fv("hccn_tool", "warn", "network not checked: no hccn_tool on the host", host="n0")]


def test_check_net_no_conf_and_no_device():
    assert H.check_net(probe(), host="n0") == [
        fv(
            "hccn.conf",
            "warn",
            "/etc/hccn.conf: not found; device IPs not compared",
            host="n0",
            source="hicann/hccl rank_table_config_a2.md",
        ),
        fv("hccn_tool", "warn", "no NPU device found (no address_N in /etc/hccn.conf, no /dev/davinciN)", host="n0"),
    ]
    assert H.check_net(probe(conf=b"address_0=10.0.0.1\n")) == [
        fv("hccn_tool", "warn", "no NPU device found (no address_N in /etc/hccn.conf, no /dev/davinciN)")
    ]


def test_check_net_two_devices_compared_to_hccn_conf_with_tls_and_ip_plan():
    conf = b"address_0=10.20.0.10\naddress_1=10.20.0.99\n"
    outputs = {1: healthy(1, "10.20.0.11", "tls switch[1]"), 0: healthy(0, "10.20.0.10")}
    pings = {0: {"10.20.1.10": raw("ping_ok.txt")}}
    found = H.check_net(probe(outputs, pings, conf=conf), "910b", "n0")
    src = cite(load_hccl().ip_plan("910b"))
    assert found == [
        fv("link", "ok", "link status UP", 0, "n0"),
        fv("net_health", "ok", "net health Success", 0, "n0"),
        fv("ip", "ok", "device ip 10.20.0.10 matches /etc/hccn.conf address_0=10.20.0.10", 0, "n0", IP_SRC),
        fv("ping 10.20.1.10", "ok", "10.20.1.10 reachable", 0, "n0"),
        fv("link", "ok", "link status UP", 1, "n0"),
        fv("net_health", "ok", "net health Success", 1, "n0"),
        fv("ip", "fail", "device ip 10.20.0.11 differs from /etc/hccn.conf address_1=10.20.0.99", 1, "n0", IP_SRC),
        fv("tls", "fail", "TLS switch differs between devices (on: n0:1); set one value everywhere", source=TLS_SRC),
        fv("ip_plan", "ok", "all 2 ports in 10.20.0.0/16", host="n0", source=src),
    ]


def test_check_net_without_host_names_tls_devices_with_a_dash_and_without_chip_no_ip_plan():
    outputs = {0: healthy(0, "10.20.0.10"), 6: healthy(6, "10.20.0.16", "tls switch[1]")}
    found = H.check_net(probe(outputs, conf=b""))
    assert found[-1] == fv(
        "tls", "fail", "TLS switch differs between devices (on: -:6); set one value everywhere", source=TLS_SRC
    )
    assert [f.rule for f in found].count("ip_plan") == 0 and len(found) == 5


def test_check_net_ip_plan_only_when_an_address_was_read_and_tls_only_when_one_was():
    outputs = {0: {"link": raw("link_up.txt"), "net_health": None, "tls": None, "ip": None}}
    found = H.check_net(probe(outputs, conf=b"address_0=10.0.0.1\n"), "910b")
    assert found == [
        fv("link", "ok", "link status UP", 0),
        fv("net_health", "fail", "hccn_tool gave no output for net_health", 0),
        fv("tls", "fail", "hccn_tool gave no output for tls", 0),
        fv("ip", "fail", "hccn_tool gave no output for ip", 0),
    ]


def test_check_net_a_querys_error_replaces_a_finding_that_is_not_ok():
    outputs = {2: {"link": None, "net_health": raw("busy.txt"), "tls": b"tls switch[0]", "ip": b"ipaddr:10.0.0.2\nnetmask:24\n"}}
    pings = {2: {"10.0.0.9": None}}
    errors = {
        (2, "link"): "timed out after 3 s",
        (2, "net_health"): "exit 1",
        (2, "ping 10.0.0.9"): "no recording",
        (2, "ip"): "never used: ip is ok",
        (3, "tls"): "another device",
    }
    found = H.check_net(probe(outputs, pings, errors, conf=b"address_2=10.0.0.2\n"), None, "h")
    assert found == [
        fv("link", "fail", "timed out after 3 s", 2, "h"),
        fv("net_health", "fail", "exit 1", 2, "h"),
        fv("ip", "ok", "device ip 10.0.0.2 matches /etc/hccn.conf address_2=10.0.0.2", 2, "h", IP_SRC),
        fv("ping 10.0.0.9", "fail", "no recording", 2, "h"),
        fv("tls", "ok", "TLS switch 0 on all 1 devices", source=TLS_SRC),
    ]


def test_check_net_asserts_its_argument():
    with pytest.raises(AssertionError):
        H.check_net({"tool": "x"})  # type: ignore[arg-type]


# --- net_from_probe_facts ------------------------------------------------------------------------------------


@pytest.mark.parametrize("state", [None, "x", [], {}, {"tool": "", "conf": "x", "outputs": [], "pings": 3, "errors": ["0 link"]}])
def test_probe_facts_of_the_wrong_shape_are_an_empty_probe(state):
    net = H.net_from_probe_facts(state)
    assert net == H.NetProbe(None, "no hccn_tool on the host", Evidence("/etc/hccn.conf", None, "not found"), {}, {}, {})


def test_probe_facts_read():
    state = {
        "tool": "/usr/local/Ascend/driver/tools/hccn_tool",
        "conf": {"exists": True, "content": "address_0=10.0.0.1\n"},
        "outputs": {"0": {"link": "link status: UP\n", "tls": None, "ip": 5}, "999": {"link": "x"}},
        "pings": {"1": {"10.0.0.2": "3 packets transmitted, 3 received, 0% packet loss"}},
        "errors": {"0 link": "timed out", "1 ping 10.0.0.2": "a\nb", "x link": "dropped", 3: "no what"},
    }
    net = H.net_from_probe_facts(state)
    assert net.tool == "/usr/local/Ascend/driver/tools/hccn_tool" and net.skipped == "no hccn_tool on the host"
    assert net.hccn_conf == Evidence("/etc/hccn.conf", b"address_0=10.0.0.1\n", None)
    assert net.outputs == {0: {"link": b"link status: UP\n", "tls": None, "ip": None}, 999: {"link": b"x"}}
    assert net.pings == {1: {"10.0.0.2": b"3 packets transmitted, 3 received, 0% packet loss"}}
    assert net.errors == {(0, "link"): "timed out", (1, "ping 10.0.0.2"): "a | b", (3, ""): "no what"}


def test_probe_facts_device_keys_are_at_most_3_ascii_digits_and_their_outputs_dicts():
    outs = {"1000": {"link": "a"}, "12": {"link": "b"}, "-1": {"link": "c"}, "a": {"link": "d"}, 4: {"link": "e"},
            "5": "link status: UP", "6": {7: "x"}, "": {"link": "f"}}  # fmt: skip
    net = H.net_from_probe_facts({"outputs": outs, "pings": outs})
    assert net.outputs == net.pings == {12: {"link": b"b"}, 6: {"7": b"x"}}


def test_probe_facts_keep_64_outputs_per_device():
    many = {f"w{i}": "x" for i in range(65)}
    assert list(H.net_from_probe_facts({"outputs": {"0": many}}).outputs[0]) == [f"w{i}" for i in range(64)]
    assert len(H.net_from_probe_facts({"outputs": {"0": dict(list(many.items())[:64])}}).outputs[0]) == 64


def test_probe_facts_texts_are_utf8_cut_to_max_chars_bytes():
    net = H.net_from_probe_facts({"outputs": {"0": {"a": "x" * 65537, "b": "\udcff\u00e9", "c": "y" * 65536}}})
    assert net.outputs[0] == {"a": b"x" * 65536, "b": b"?\xc3\xa9", "c": b"y" * 65536}
    net = H.net_from_probe_facts({"conf": {"exists": True, "content": "\u00e9" * 40000}})
    assert net.hccn_conf.data == b"\xc3\xa9" * 32768


def test_probe_facts_conf_missing_or_not_text():
    assert H.net_from_probe_facts({"conf": {"exists": False, "content": "address_0=10.0.0.1"}}).hccn_conf == Evidence(
        "/etc/hccn.conf", None, "not found"
    )
    assert H.net_from_probe_facts({"conf": {"exists": True, "content": 5}}).hccn_conf == Evidence("/etc/hccn.conf", None, None)


def test_probe_facts_cut_the_tool_and_each_error_to_200_characters():
    net = H.net_from_probe_facts({"tool": "t" * 201, "errors": {"0 link": "e" * 201, "1 tls": "f" * 200}})
    assert net.tool == "t" * 200 + "..."
    assert net.errors == {(0, "link"): "e" * 200 + "...", (1, "tls"): "f" * 200}
    assert H.net_from_probe_facts({"tool": "a\nb\x00"}).tool == "a | b?"
    assert H.net_from_probe_facts({"tool": 5}).tool is None


def test_probe_facts_a_non_ascii_digit_key_is_dropped_not_a_crash():
    # "²" passed str.isdigit() and int("²") raised (a host could crash provision's summary); "١" read as device 1
    net = H.net_from_probe_facts(
        {"outputs": {"\u00b2": {"link": "x"}, "\u0661": {}}, "errors": {"\u00b2 link": "x", "\u0661 ip": "y"}}
    )
    assert (net.outputs, net.errors) == ({}, {})


# --- net_verdict --------------------------------------------------------------------------------------------


def test_net_verdict():
    ok = fv("link", "ok", "link status UP", 0)
    warn = fv("net_health", "warn", "net health Init: must be Success", 1)
    fail0 = fv("link", "fail", "link status DOWN: must be UP", 0)
    fail_node = fv("tls", "fail", "TLS differs")
    assert H.net_verdict([]) == "ok (0 checks)"
    assert H.net_verdict([ok, ok]) == "ok (2 checks)"
    assert H.net_verdict([ok, warn]) == "warn 1: dev 1 net_health: net health Init: must be Success"
    assert H.net_verdict([warn, fail0]) == "FAIL 1: dev 0 link: link status DOWN: must be UP"
    assert H.net_verdict([fail_node, ok, fail0]) == "FAIL 2: tls: TLS differs; dev 0 link: link status DOWN: must be UP"
    assert H.net_verdict([fail0, fail_node, fail0, warn]) == (
        "FAIL 3: dev 0 link: link status DOWN: must be UP; tls: TLS differs (+1 more)"
    )
    assert H.net_verdict([warn, warn, warn, warn]) == (
        "warn 4: dev 1 net_health: net health Init: must be Success; dev 1 net_health: net health Init: must be Success (+2 more)"
    )
