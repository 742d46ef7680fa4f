"""The provisioning preflight's network facts: the probe module runs hccn_tool's read-only queries (with a
timeout) where hccn_tool exists, the controller checks the raw answers and the run's summary reports them per host."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from envkit.executor.ansible import parse_lines
from envkit.jobs.provision import PROBE_TASK, format_table, summarize_provision
from tests.provision.conftest import local_ansible_playbook, run_probe

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
HCCN = ROOT / "tests" / "fixtures" / "hccn"

# answers by device (-i N); device 1's link is DOWN, device 3 hangs on -net_health; every call is logged
TOOL = r"""#!/bin/sh
echo "$*" >> __LOG__
F=__FIX__
case "$2:$3" in
  1:-link) cat $F/link_down.txt ;;
  3:-net_health) exec sleep 60 ;;
  *:-link) cat $F/link_up.txt ;;
  *:-net_health) cat $F/net_health_success.txt ;;
  *:-tls) cat $F/tls.txt ;;
  *:-ip) grep "^address_$2=" __CONF__ | sed 's/.*=/ipaddr:/'; echo netmask:255.255.0.0 ;;
  *:-ping) if [ "$6" = 10.20.1.10 ]; then cat $F/ping_ok.txt; else cat $F/ping_fail.txt; fi ;;
  *) echo "unexpected: $*"; exit 9 ;;
esac
"""


def _run_probe(tmp_path: Path, args: dict) -> dict:
    ansible = local_ansible_playbook()
    p = run_probe(ansible, tmp_path, {"install_path": str(tmp_path), "npu_smi": False, **args}, timeout=180)
    assert p.returncode == 0, p.stdout + p.stderr
    return json.loads((tmp_path / "result.json").read_text())["ansible_facts"]["envkit_state"]


def _summary_of(host: str, hccn: dict, unchanged: bool = False):
    """hccn_tool's answers as the preflight reports them: its network report, or (a host on which nothing changes)
    within the probe's message, the report it ends its play with."""
    task, msg = ("Preflight | Report network", hccn) if not unchanged else (PROBE_TASK, {"warnings": [], "network": hccn})
    lines = [
        json.dumps({"event": "play", "check": False, "hosts": [host]}),
        json.dumps({"event": "result", "host": host, "task": f"envkit_preflight : {task}", "status": "ok", "msg": msg}),
        json.dumps({"event": "stats", "hosts": {host: {"ok": 3, "changed": 0, "failed": 0, "unreachable": 0}}}),
    ]
    return summarize_provision(parse_lines(lines))


def test_probe_gathers_hccn_answers_and_the_summary_checks_them(tmp_path):
    conf = tmp_path / "hccn.conf"
    conf.write_text("".join(f"address_{d}=10.20.0.{10 + d}\nnetmask_{d}=255.255.0.0\n" for d in range(4)))
    log = tmp_path / "calls.log"
    tool = tmp_path / "hccn_tool"
    tool.write_text(TOOL.replace("__LOG__", str(log)).replace("__FIX__", str(HCCN)).replace("__CONF__", str(conf)))
    tool.chmod(0o755)
    st = _run_probe(
        tmp_path,
        {
            "hccn_tool": str(tool),
            "hccn_conf": str(conf),
            "hccn_timeout": 2,
            "hccn_peers": ["10.20.1.10", "10.20.1.11", "10.20.0.10", "-s"],
        },
    )
    h = st["hccn"]
    assert h["tool"] == str(tool) and sorted(h["outputs"]) == ["0", "1", "2", "3"]
    assert "link status: DOWN" in h["outputs"]["1"]["link"]
    assert h["outputs"]["3"]["net_health"] is None and "timed out after 2 s" in h["errors"]["3 net_health"]
    # only read-only queries ran; a peer that is not an address is never passed on; a device never pings itself
    calls = log.read_text().splitlines()
    assert all(c.split()[2] in ("-link", "-net_health", "-tls", "-ip", "-ping") and "-s" not in c.split() for c in calls), calls
    assert sorted(h["pings"]["0"]) == ["10.20.1.10", "10.20.1.11"] and "10.20.0.10" in h["pings"]["1"]

    s = _summary_of("node1", h)
    row = s.hosts["node1"]
    assert _summary_of("node1", h, unchanged=True).hosts["node1"].to_dict() == row.to_dict()
    assert row.net.startswith("FAIL ") and "dev 1 link: link status DOWN" in row.net, row.net
    by = {(f["device"], f["check"]): f["status"] for f in row.net_findings}
    assert by[(0, "link")] == "ok" and by[(0, "ip")] == "ok" and by[(0, "ping 10.20.1.10")] == "ok"
    assert by[(0, "ping 10.20.1.11")] == "fail" and by[(3, "net_health")] == "fail" and by[(None, "tls")] == "ok"
    assert row.to_dict()["net"] == row.net
    table = format_table(s)
    assert table[0].split()[-1] == "net" and "FAIL" in table[1]


def test_probe_without_hccn_tool_reports_nothing(tmp_path):
    if Path("/usr/local/Ascend/driver/tools/hccn_tool").exists():
        pytest.skip("this host has a real hccn_tool")
    st = _run_probe(tmp_path, {"hccn_tool": str(tmp_path / "absent")})
    assert st["hccn"] == {}
    st = _run_probe(tmp_path, {"hccn": False})
    assert st["hccn"] == {}


@pytest.mark.parametrize(
    "msg",
    [
        {"tool": "/x", "outputs": "not a map"},
        {"tool": ["/x"], "outputs": {"0": {"link": 7}}, "pings": {"x": {}}, "errors": ["a"], "conf": "?"},
        {"tool": "/x\x1b[2J", "outputs": {"0": {"link": "\x00" * 100000}}, "errors": {"0 link": "\x07" * 10}},
        {},
    ],
)
@pytest.mark.parametrize("unchanged", [False, True])
def test_hostile_network_facts_are_findings_not_tracebacks(msg, unchanged):
    row = _summary_of("n", msg, unchanged).hosts["n"]
    if unchanged and not msg:  # an unchanged host's report: {} is "hccn_tool was not asked"
        assert row.net == "not checked"
        return
    assert row.net.startswith(("FAIL", "warn")), row.net
    assert "\x1b" not in row.net and "\x00" not in json.dumps(row.to_dict())


def test_preflight_reports_the_probes_hccn_facts():
    tasks = yaml.safe_load((PLAYBOOKS / "roles/envkit_preflight/tasks/main.yml").read_text())
    probe = next(
        t for t in yaml.safe_load((PLAYBOOKS / "roles/envkit_preflight/tasks/probe.yml").read_text()) if "envkit_probe" in t
    )
    assert probe["envkit_probe"]["hccn_peers"] == "{{ envkit_preflight_hccn_peers }}"
    report = next(t for t in tasks if t.get("name") == "Preflight | Report network")
    assert report["ansible.builtin.debug"]["msg"] == "{{ ansible_facts.envkit_state.hccn }}"
