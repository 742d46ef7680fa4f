"""hccn_tool output parsers on the recorded vendor samples, hostile output, the IP plan per chip."""

from __future__ import annotations

from pathlib import Path

import pytest

from envkit.doctor import hccn as H
from envkit.launch.inventory import read_hccn_conf

F = Path(__file__).resolve().parents[1] / "fixtures" / "hccn"


def read(name: str) -> str:
    return (F / name).read_text()


def test_recorded_samples_parse():
    assert H.parse_link(read("link_up.txt")) == "UP" and H.parse_link(read("link_down.txt")) == "DOWN"
    assert H.parse_net_health(read("net_health_success.txt")) == "Success"
    assert H.parse_net_health(read("net_health_init.txt")) == "Init"
    assert H.parse_net_health(read("net_health_fault.txt")) == "Fault"
    assert H.parse_tls(read("tls.txt")) == 0 and H.parse_tls(read("tls_enabled.txt")) == 1
    assert H.parse_ip(read("ip.txt")) == ("10.20.0.10", "255.255.255.0")
    assert H.parse_ping(read("ping_ok.txt")) == H.Ping(3, 3, 0.0)
    assert H.parse_ping(read("ping_loss.txt")) == H.Ping(3, 2, 33.33)
    assert H.parse_ping(read("ping_fail.txt")) == H.Ping(3, 0, 100.0)


def test_device_checks_on_samples():
    out = H.DeviceOutputs(0, link=read("link_up.txt"), net_health=read("net_health_success.txt"), tls=read("tls.txt"),
                          ip=read("ip.txt"), ping={"10.20.1.10": read("ping_fail.txt"), "10.20.1.11": read("ping_ok.txt")})
    findings, facts = H.check_device(out, hccn_address="10.20.0.11", host="n0")
    by = {f.check: f for f in findings}
    assert facts == {"link": "UP", "net_health": "Success", "tls": 0, "ip": "10.20.0.10", "netmask": "255.255.255.0"}
    assert by["link"].status == "ok" and by["net_health"].status == "ok"
    assert by["ip"].status == "fail" and "address_0=10.20.0.11" in by["ip"].message and "EI0014" in by["ip"].source
    assert by["ping 10.20.1.10"].status == "fail" and by["ping 10.20.1.11"].status == "ok"
    down, _ = H.check_device(H.DeviceOutputs(1, link=read("link_down.txt"), net_health=read("net_health_init.txt")))
    assert [(f.check, f.status) for f in down][:2] == [("link", "fail"), ("net_health", "warn")]


@pytest.mark.parametrize(
    "raw",
    [
        b"\x00\xff\xfe\x1b[2J\x07" * 50,
        "link status: UP\nlink status: DOWN\n",  # two contradicting lines
        "link status: MAYBE\n",
        "A" * 200_000,
        "",
        None,
        "\u202e\u0000net health status: Success\u0000",
    ],
)
def test_hostile_output_is_a_finding_not_a_traceback(raw):
    findings, facts = H.check_device(H.DeviceOutputs(2, link=raw, net_health=raw, tls=raw, ip=raw, ping={"10.0.0.1": raw}))
    assert facts.get("link") is None
    link = next(f for f in findings if f.check == "link")
    assert link.status == "fail" and ("unreadable" in link.message or "no output" in link.message)
    assert all(len(f.message) < 400 and f.message.isprintable() for f in findings)


def test_busy_tool_is_a_warning():
    findings, _ = H.check_device(H.DeviceOutputs(0, link=read("busy.txt")))
    assert findings[0].status == "warn" and "busy" in findings[0].message


def test_tls_must_match_across_nodes():
    assert H.check_tls_consistent({("a", 0): 0, ("a", 1): 0, ("b", 0): 0}).status == "ok"
    bad = H.check_tls_consistent({("a", 0): 0, ("b", 3): 1})
    assert bad.status == "fail" and "b:3" in bad.message and "EI0016" in bad.source


def test_ip_plan_a2_one_subnet_and_a3_die_pairs():
    a2 = {d: (v.address, v.netmask) for d, v in read_hccn_conf(F / "a2_node0.hccn.conf").items()}
    assert H.check_ip_plan("910b", a2)[0].status == "ok"
    a2[5] = ("10.99.0.5", "255.255.0.0")
    assert H.check_ip_plan("910b", a2)[0].status == "fail"
    a3 = {d: (v.address, v.netmask) for d, v in read_hccn_conf(F / "a3_node0.hccn.conf").items()}
    assert H.check_ip_plan("a3", a3)[0].status == "ok"
    a3[3] = ("10.30.0.13", "255.255.255.0")  # die 1 of NPU 1 now shares die 0's subnet
    fails = [f for f in H.check_ip_plan("a3", a3) if f.status == "fail"]
    assert len(fails) == 1 and fails[0].device == 2 and "NPU 1" in fails[0].message
    assert H.check_ip_plan("310p", a3)[0].status == "warn"
