"""hccn_tool output parsers on the recorded vendor samples, hostile output, the IP plan per chip."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.fleet import hccn as H
from envkit.fleet.inventory import read_hccn_conf

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
    out = H.DeviceOutputs(
        0,
        link=read("link_up.txt"),
        net_health=read("net_health_success.txt"),
        tls=read("tls.txt"),
        ip=read("ip.txt"),
        ping={"10.20.1.10": read("ping_fail.txt"), "10.20.1.11": read("ping_ok.txt")},
    )
    findings, facts = H.check_device(out, hccn_address="10.20.0.11", host="n0")
    by = {f.rule: f for f in findings}
    assert facts == {"link": "UP", "net_health": "Success", "tls": 0, "ip": "10.20.0.10", "netmask": "255.255.255.0"}
    assert by["link"].status == "ok" and by["net_health"].status == "ok"
    assert by["ip"].status == "fail" and "address_0=10.20.0.11" in by["ip"].message and "EI0014" in by["ip"].source
    assert by["ping 10.20.1.10"].status == "fail" and by["ping 10.20.1.11"].status == "ok"
    down, _ = H.check_device(H.DeviceOutputs(1, link=read("link_down.txt"), net_health=read("net_health_init.txt")))
    assert [(f.rule, f.status) for f in down][:2] == [("link", "fail"), ("net_health", "warn")]


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
    link = next(f for f in findings if f.rule == "link")
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


# --- `envkit doctor --net`: recorded outputs in a root, hccn_tool run on a host ---------------------------


def _record(root: Path, dev: int, what: str, text: str | bytes) -> None:
    path = root / "var/log/envkit/hccn_tool" / f"{dev}-{what}.txt"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text if isinstance(text, bytes) else text.encode())


def _healthy_device(root: Path, dev: int, ip: str) -> None:
    _record(root, dev, "link", read("link_up.txt"))
    _record(root, dev, "net_health", read("net_health_success.txt"))
    _record(root, dev, "tls", read("tls.txt").replace("dev_id:0", f"dev_id:{dev}"))
    _record(root, dev, "ip", f"ipaddr:{ip}\nnetmask:255.255.0.0\n")


def test_doctor_net_reads_a_roots_recording(root_copy, run_cli):
    root = root_copy("healthy-a2")
    (root / "etc/hccn.conf").write_text(read("a2_node0.hccn.conf"))
    conf = read_hccn_conf(F / "a2_node0.hccn.conf")
    for dev, item in conf.items():
        _healthy_device(root, dev, item.address)
    _record(root, 3, "link", read("link_down.txt"))
    _record(root, 5, "net_health", (F / "garbled_link.bin").read_bytes())
    _record(root, 6, "tls", read("tls_enabled.txt"))
    _record(root, 0, "ping-10.20.1.10", read("ping_ok.txt"))
    _record(root, 1, "ping-10.20.1.11", read("ping_fail.txt"))
    # without --net the report is what it always was: no net key, the same exit status
    rc0, out0, _ = run_cli("doctor", "--root", str(root), "--json")
    assert "net" not in json.loads(out0)
    rc, out, _ = run_cli("doctor", "--root", str(root), "--json", "--net", "-i", str(_inventory(root.parent)))
    assert rc == 1
    doc = json.loads(out)
    net = doc["net"]
    assert net["tool"] == "/var/log/envkit/hccn_tool" and net["devices"] == list(range(8))
    assert net["peers"]["0"] == ["10.20.1.10"]  # its own address_0 is never pinged
    by = {(f["device"], f["check"]): f for f in net["findings"]}
    assert by[(3, "link")]["status"] == "fail" and "DOWN" in by[(3, "link")]["message"]
    assert by[(5, "net_health")]["status"] == "fail" and "unreadable" in by[(5, "net_health")]["message"]
    assert by[(0, "ping 10.20.1.10")]["status"] == "ok" and by[(1, "ping 10.20.1.11")]["status"] == "fail"
    assert by[(2, "ping 10.20.1.12")]["status"] == "fail" and "not found" in by[(2, "ping 10.20.1.12")]["message"]
    assert by[(0, "ip")]["status"] == "ok"
    assert by[(None, "tls")]["status"] == "fail" and "(on: -:6)" in by[(None, "tls")]["message"]
    assert by[(None, "ip_plan")]["status"] == "ok"  # chip 910b: the 8 ports in one subnet
    assert "net device 3 link: link status DOWN: must be UP" in doc["failures"]
    rc, text, _ = run_cli("doctor", "--root", str(root), "--net", "--peers", "10.20.1.10")
    assert rc == 1 and "network (hccn_tool: /var/log/envkit/hccn_tool; devices 0, 1, 2, 3, 4, 5, 6, 7):" in text
    assert "FAIL  device 3 link" in text and "network checks:" in text


def _inventory(d: Path) -> Path:
    inv = d / "inv.ini"
    inv.write_text(f"[ascend]\nn0 envkit_hccn_conf={F / 'a2_node0.hccn.conf'}\nn1 envkit_hccn_conf={F / 'a2_node1.hccn.conf'}\n")
    return inv


def test_doctor_net_bad_inputs_and_no_recording(root_copy, run_cli, tmp_path):
    root = root_copy("healthy-a2")
    rc, out, err = run_cli("doctor", "--root", str(root), "--net", "--peers", "10.0.0.1,-s")
    assert rc == 2 and "'-s' is not an IP address" in err
    rc, _, err = run_cli("doctor", "--root", str(root), "--peers", "10.0.0.1")
    assert rc == 2 and "go with --net" in err
    rc0, _, _ = run_cli("doctor", "--root", str(root))
    rc, out, _ = run_cli("doctor", "--root", str(root), "--net", "--json")
    net = json.loads(out)["net"]
    assert rc == rc0 and net["tool"] is None
    assert [f["status"] for f in net["findings"]] == ["warn"] and "no recorded hccn_tool output" in net["findings"][0]["message"]


FAKE_TOOL = r"""#!/bin/sh
# a fake hccn_tool: answers from the fixtures by its arguments; device 2 hangs, device 1 is busy
F=__FIX__
case "$2:$3" in
  2:-link) exec sleep 60 ;;
  1:-link) cat $F/busy.txt; exit 1 ;;
  *:-link) cat $F/link_up.txt ;;
  *:-net_health) cat $F/net_health_success.txt ;;
  *:-tls) cat $F/tls.txt ;;
  *:-ip) printf 'ipaddr:10.20.0.1%s\nnetmask:255.255.255.0\n' "$2" ;;
  *:-ping) cat $F/ping_ok.txt ;;
  *) echo "unexpected: $*" >&2; exit 9 ;;
esac
"""


def test_doctor_net_runs_hccn_tool_on_a_host(tmp_path, monkeypatch):
    from envkit.jobs.doctor import run_doctor

    bindir = tmp_path / "bin"
    bindir.mkdir()
    tool = bindir / "hccn_tool"
    tool.write_text(FAKE_TOOL.replace("__FIX__", str(F)))
    tool.chmod(0o755)
    monkeypatch.setenv("PATH", f"{bindir}:{os.environ['PATH']}")
    import envkit.jobs.doctor.observe as P

    monkeypatch.setattr(P, "HCCN_TOOL", str(tmp_path / "absent"))  # this host's driver folder must not interfere
    monkeypatch.setattr(P, "_hccn_devices", lambda target, conf, recorded: [0, 1, 2])
    report = run_doctor("/", net=True, peers=["10.20.9.9"], timeout=3, net_log="x EI0016 y\n")
    net = report.net
    assert net is not None and net.tool == str(tool) and net.devices == [0, 1, 2]
    by = {(f.device, f.check): f for f in net.findings}
    assert by[(0, "link")].status == "ok" and by[(0, "ping 10.20.9.9")].status == "ok"
    assert by[(1, "link")].status == "warn" and "busy" in by[(1, "link")].message
    assert by[(2, "link")].status == "fail" and "timed out after 3 s" in by[(2, "link")].message
    assert [c["code"] for c in net.codes] == ["EI0016"] and net.codes[0]["cause"]
    assert report.exit_code == 1
