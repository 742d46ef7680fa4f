"""envkit provision without hosts: vars rendering, bundle checks, event parsing, argv, role conventions."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from envkit.errors import BadInput
from envkit.executor.ansible import PlaybookRun, parse_lines, playbook_command, playbook_env
from envkit.jobs.provision import (
    PREFLIGHT_CHECK,
    PROBE_TASK,
    BundlePaths,
    firmware_in_range,
    format_plan,
    format_table,
    locate_bundle,
    pack_wheels,
    render_vars,
    stage_artifacts,
    summarize_provision,
)
from envkit.lock.file import read_lock
from tests.provision.conftest import local_ansible_playbook, run_local_playbook, run_probe, write_play
from tests.provision.fleet import resolve_lock, sha256, with_fixture_zip_hashes, write_vendor

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
ROLES = sorted(p for p in (PLAYBOOKS / "roles").iterdir() if p.is_dir())


@pytest.fixture(scope="module")
def locks(tmp_path_factory):
    d = tmp_path_factory.mktemp("locks")
    return {"old": resolve_lock(d / "old.lock", "--cann", "8.3.RC1"), "new": resolve_lock(d / "new.lock")}


def _wheels(d: Path) -> Path:
    d.mkdir(parents=True)
    (d / "six-1.17.0-py2.py3-none-any.whl").write_bytes(b"not really a wheel")
    (d / "requirements.txt").write_text(f"six==1.17.0 --hash=sha256:{sha256(d / 'six-1.17.0-py2.py3-none-any.whl')}\n")
    return d


def test_render_vars_old_layout(tmp_path, locks):
    write_vendor(locks["old"], tmp_path / "vendor")
    paths = locate_bundle(None, tmp_path / "vendor", _wheels(tmp_path / "wheels"))
    lock = read_lock(locks["old"])
    v = render_vars(lock, lock_path=locks["old"], bundle=paths)
    assert v["envkit_hdk_driver"]["package_version"] == "25.3.rc1"
    assert v["envkit_hdk_driver"]["flags"] == ["--full", "--install-for-all"]
    assert v["envkit_hdk_firmware"]["edition"] == "run"
    assert v["envkit_hdk_firmware"]["src"].startswith("Ascend-hdk-910b-npu-firmware_")
    comps = [p["component"] for p in v["envkit_cann_packages"]]
    assert comps == ["cann-toolkit", "cann-kernels", "cann-nnal"]
    assert (
        v["envkit_cann_packages"][0]["info_file"]
        == "/usr/local/Ascend/ascend-toolkit/latest/x86_64-linux/ascend_toolkit_install.info"
    )
    assert [p["needs_env"] for p in v["envkit_cann_packages"]] == [False, False, True]
    assert v["envkit_preflight_lock_os_family"] == "debian" and v["envkit_preflight_lock_arch"] == "x86_64"
    assert v["envkit_python_enabled"] is True and len(v["envkit_python_requirements_sha256"]) == 64
    # every vendor sha256 is the file's
    for art in [v["envkit_hdk_driver"], v["envkit_hdk_firmware"], *v["envkit_cann_packages"]]:
        assert art["sha256"] == sha256(tmp_path / "vendor" / art["src"])


def test_render_vars_new_layout_zip_editions(tmp_path, locks):
    write_vendor(locks["new"], tmp_path / "vendor", as_zip=True)
    lock_path = with_fixture_zip_hashes(locks["new"], tmp_path / "vendor", tmp_path / "zip.lock")
    (tmp_path / "vendor" / "SHA256SUMS").unlink()  # the zip hashes come from the lock itself
    (tmp_path / "vendor" / "SHA256SUMS").write_text(
        "\n".join(f"{sha256(p)}  {p.name}" for p in (tmp_path / "vendor").glob("*.run")) + "\n"
    )
    lock = read_lock(lock_path)
    v = render_vars(lock, lock_path=lock_path, bundle=BundlePaths(tmp_path / "vendor", None, None))
    assert v["envkit_hdk_driver"]["edition"] == "zip" and v["envkit_hdk_firmware"]["edition"] == "zip"
    assert v["envkit_hdk_firmware"]["run_pattern"] == "Ascend-hdk-910b-npu-firmware_*.run"
    assert [p["component"] for p in v["envkit_cann_packages"]] == ["cann-toolkit", "cann-ops", "cann-nnal"]
    assert v["envkit_cann_packages"][1]["info_file"] == "/usr/local/Ascend/cann-9.1.0/x86_64-linux/ascend_ops_install.info"
    assert v["envkit_python_enabled"] is False


def test_zip_hash_must_match_the_lock(tmp_path, locks):
    write_vendor(locks["new"], tmp_path / "vendor", as_zip=True)
    with pytest.raises(BadInput, match="does not match the lock"):
        stage_artifacts(read_lock(locks["new"]), tmp_path / "vendor")


def test_missing_file_and_missing_hash(tmp_path, locks):
    write_vendor(locks["old"], tmp_path / "vendor")
    lock = read_lock(locks["old"])
    (tmp_path / "vendor" / "SHA256SUMS").unlink()
    with pytest.raises(BadInput, match="no sha256"):
        stage_artifacts(lock, tmp_path / "vendor")
    write_vendor(locks["old"], tmp_path / "vendor")
    next((tmp_path / "vendor").glob("Ascend-cann-nnal_*")).unlink()
    with pytest.raises(BadInput, match="missing vendor files for cann-nnal"):
        stage_artifacts(lock, tmp_path / "vendor")
    bad = tmp_path / "vendor" / next(p.name for p in (tmp_path / "vendor").glob("Ascend-cann-toolkit_*"))
    write_vendor(locks["old"], tmp_path / "vendor")
    bad.write_text("tampered")
    with pytest.raises(BadInput, match="does not match SHA256SUMS"):
        stage_artifacts(lock, tmp_path / "vendor")


def test_a_bundle_archive_is_refused_with_the_step_that_gives_its_folder(tmp_path):
    """`envkit bundle build -o out/bundle.tar` writes an archive; provision reads a folder: the error says to extract it
    (the archive holds the folder `bundle/`) or to build a folder."""
    (tmp_path / "out").mkdir()
    archive = tmp_path / "out" / "bundle.tar"
    archive.write_bytes(b"")
    with pytest.raises(BadInput) as exc:
        locate_bundle(archive, None, None)
    err = exc.value
    assert err.message == f"--bundle {archive} is a file: provision reads the bundle's folder"
    assert f"`tar -xf {archive}` writes the folder bundle/" in err.hint and "--bundle bundle," in err.hint
    assert "envkit bundle build --lock LOCK --artifacts DIR -o FOLDER" in err.hint


@pytest.mark.parametrize(
    "fw, ranges, expected",
    [
        ("7.5.0.1.129", "[7.0.0,7.5.99]", True),
        ("7.8.0.2.212", "[7.0.0,7.5.99]", False),
        ("7.8.0.2.212", "[6.4.0,6.4.99],[7.0.0,8.9.9]", True),
        ("24.1.0", "[23.0.0,23.0.0.],[24.0,24.0.],[24.1,24.1.]", True),
        ("", "[7.0.0,7.5.99]", None),
        ("7.5.0", "", None),
    ],
)
def test_firmware_in_range(fw, ranges, expected):
    assert firmware_in_range(fw, ranges) is expected


def test_summarize_events():
    lines = [
        json.dumps({"event": "play", "check": True, "hosts": ["a", "b", "c"]}),
        "a stray line",
        json.dumps(
            {
                "event": "result",
                "host": "a",
                "task": "envkit_hdk : HDK | Report plan",
                "status": "changed",
                "msg": ["firmware 25.3.rc1 -> 26.0.rc1", "driver 25.3.rc1 -> 26.0.rc1"],
            }
        ),
        json.dumps(
            {
                "event": "result",
                "host": "a",
                "task": "envkit_smoke : Smoke | Report verdict",
                "status": "ok",
                "msg": {"smoke": "skipped: torch not in this stack's venv", "doctor": "ok"},
            }
        ),
        json.dumps(
            {
                "event": "result",
                "host": "b",
                "task": "Gathering Facts",
                "status": "unreachable",
                "msg": "Failed to connect to the host via ssh",
            }
        ),
        json.dumps(
            {
                "event": "stats",
                "hosts": {
                    "a": {"ok": 9, "changed": 1, "failed": 0, "unreachable": 0},
                    "b": {"ok": 0, "changed": 0, "failed": 0, "unreachable": 1},
                },
            }
        ),
    ]
    s = summarize_provision(parse_lines(lines))
    assert s.check and s.complete
    assert s.hosts["a"].plan == ["firmware 25.3.rc1 -> 26.0.rc1", "driver 25.3.rc1 -> 26.0.rc1"]
    assert s.hosts["a"].smoke.startswith("skipped") and s.hosts["a"].doctor == "ok"
    assert s.hosts["b"].status == "unreachable" and s.hosts["c"].status == "not run"
    assert s.exit_code == 1
    assert [h.host for h in s.bad_hosts] == ["b", "c"]
    table = format_table(s)
    assert table[0].split() == ["host", "status", "ok", "changed", "failed", "unreachable", "smoke", "doctor"]
    plan = format_plan(s)
    assert plan[0] == "a: would change" and plan[1] == "  - firmware 25.3.rc1 -> 26.0.rc1"
    assert plan[-1] == "c: not run"


def test_an_unchanged_host_reports_in_the_probe_s_message_what_the_later_tasks_would():
    """A host on which no role has anything to do ends its play after the probe, whose message is its report: its
    warnings, the verdict recorded on it and its reports read as from the preflight check and the smoke role's
    verdict. A probe without a report (a host that goes on) reports nothing; the preflight's errors fail its check."""
    task = f"envkit_preflight : {PROBE_TASK}"
    verdict = {
        "smoke": "ok: npu (unchanged)",
        "doctor": "ok (unchanged)",
        "reports": {"doctor.json": '{"ok": true}', "smoke.json": "", "../x": "y"},
    }
    events = [
        {"event": "play", "check": False, "hosts": ["a", "b", "c", "d"]},
        {
            "event": "result",
            "host": "a",
            "task": task,
            "status": "ok",
            "msg": {"warnings": ["no Huawei PCI device (vendor 19e5) found"], "network": {}, **verdict},
        },
        {
            "event": "result",
            "host": "b",
            "task": task,
            "status": "ok",
            "msg": {"warnings": [], "network": {}},
        },  # check mode: no verdict
        {"event": "result", "host": "c", "task": task, "status": "ok"},
        {
            "event": "result",
            "host": "c",
            "task": f"envkit_preflight : {PREFLIGHT_CHECK}",
            "status": "failed",
            "msg": "/usr/local/Ascend has 0.5 GiB free; the stack needs 10 GiB.",
        },
        {"event": "result", "host": "d", "task": task, "status": "ok", "msg": ["not", "a", "dict"]},
        {"event": "stats", "hosts": {h: {"ok": 3, "changed": 0, "failed": int(h == "c"), "unreachable": 0} for h in "abcd"}},
    ]
    s = summarize_provision(events)
    a, b, c, d = (s.hosts[h] for h in "abcd")
    assert a.warnings == ["no Huawei PCI device (vendor 19e5) found"] and a.net == "not checked"
    assert (a.smoke, a.doctor, a.reports) == ("ok: npu (unchanged)", "ok (unchanged)", {"doctor.json": '{"ok": true}'})
    assert b.warnings == [] and b.reports == {} and b.smoke == d.smoke == "not run"
    assert c.status == "failed" and "0.5 GiB free" in c.errors[0] and c.reports == {}
    # what the tasks of the longer path report for the same host gives the same row
    longer = [
        events[0],
        {
            "event": "result",
            "host": "a",
            "task": f"envkit_preflight : {PREFLIGHT_CHECK}",
            "status": "ok",
            "msg": ["no Huawei PCI device (vendor 19e5) found"],
        },
        {"event": "result", "host": "a", "task": "envkit_smoke : Smoke | Report verdict", "status": "ok", "msg": verdict},
        events[-1],
    ]
    assert summarize_provision(longer).hosts["a"].to_dict() == a.to_dict()


def test_an_unchanged_host_ends_its_play_right_after_the_probe():
    """Every task costs the controller a worker process and the host's variables, per host, skipped or not: site.yml
    probes first (a pre-task: the preflight's `probe` entry point, which has no argument spec, so no spec check runs
    before it), and a converged host's play is that probe (its message is the host's report) and a meta task whose
    condition reads the probe's facts, not the roles' vars (meta conditions are evaluated on the controller one host
    at a time). The role's main entry point probes only where that has not run (the role on its own)."""
    role = PLAYBOOKS / "roles" / "envkit_preflight"
    probe, end = yaml.safe_load((role / "tasks" / "probe.yml").read_text())
    assert probe["name"] == PROBE_TASK and "envkit_probe" in probe and probe["register"] == "envkit_preflight_probed"
    assert end["ansible.builtin.meta"] == "end_host" and end["when"] == "ansible_facts.envkit_state.decide.end"
    site = yaml.safe_load((PLAYBOOKS / "site.yml").read_text())
    assert site[0]["pre_tasks"] == [
        {"name": "Probe the hosts", "ansible.builtin.import_role": {"name": "envkit_preflight", "tasks_from": "probe"}}
    ]
    specs = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]
    assert "probe" not in specs  # an entry point with a spec would get its check before the probe
    main = yaml.safe_load((role / "tasks" / "main.yml").read_text())
    assert main[0]["ansible.builtin.include_tasks"] == "probe.yml" and main[0]["when"] == "envkit_preflight_probed is not defined"
    assert site[0]["vars"]["envkit_preflight_end_unchanged"] is True
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text())
    assert defaults["envkit_preflight_end_unchanged"] is False  # another playbook running the role keeps its hosts
    # the probe is told to end the play only where site.yml says so and the host is not a fan-out head
    pre = yaml.safe_load((role / "vars" / "main.yml").read_text())
    assert (
        "'end_unchanged': envkit_preflight_end_unchanged | bool and envkit_preflight_fanout_head | length == 0"
        in (pre["envkit_preflight_expect"])
    )


def test_playbook_command_and_env(tmp_path):
    run = PlaybookRun(
        playbook=Path("/p/site.yml"),
        inventory="inv.ini",
        vars_file=Path("/o/vars.yml"),
        check=True,
        limit="node1",
        forks=20,
        serial=2,
        extra_vars=("a=1",),
    )
    assert playbook_command(run) == [
        "ansible-playbook",
        "-i",
        "inv.ini",
        "-e",
        "@/o/vars.yml",
        "--check",
        "--diff",
        "--limit",
        "node1",
        "--forks",
        "20",
        "-e",
        "envkit_serial=2",
        "-e",
        "envkit_max_fail_percentage=0",
        "-e",
        "a=1",
        "/p/site.yml",
    ]
    env = playbook_env(PLAYBOOKS, base={"PATH": "/usr/bin"})
    assert env["ANSIBLE_STDOUT_CALLBACK"] == "envkit_jsonl"
    assert env["ANSIBLE_ROLES_PATH"] == str(PLAYBOOKS / "roles")


def test_pack_wheels_is_deterministic_and_reused(tmp_path):
    w = _wheels(tmp_path / "wheels")
    a = pack_wheels(w, tmp_path / "out")
    b = pack_wheels(w, tmp_path / "out")
    assert a == b and a.is_file()
    import tarfile

    with tarfile.open(a) as t:
        assert sorted(t.getnames()) == ["requirements.txt", "six-1.17.0-py2.py3-none-any.whl"]


@pytest.mark.parametrize("role", ROLES, ids=lambda p: p.name)
def test_role_conventions(role):
    """argument_specs mirror defaults (spec defaults are not applied); every variable carries the role prefix;
    command/shell tasks have creates: or changed_when:."""
    defaults = yaml.safe_load((role / "defaults" / "main.yml").read_text()) or {}
    spec = yaml.safe_load((role / "meta" / "argument_specs.yml").read_text())["argument_specs"]["main"]["options"]
    assert set(spec) == set(defaults)
    for name, value in defaults.items():
        assert name.startswith(role.name + "_"), name
        assert spec[name]["default"] == value, name
    assert (role / "meta" / "main.yml").is_file()
    for tasks_file in (role / "tasks").glob("*.yml"):
        stack = list(yaml.safe_load(tasks_file.read_text()) or [])
        while stack:
            task = stack.pop()
            stack.extend(task.get("block", []))
            for mod in ("ansible.builtin.command", "ansible.builtin.shell"):
                if mod in task:
                    args = task[mod] if isinstance(task[mod], dict) else {}
                    assert "changed_when" in task or "creates" in args, f"{tasks_file.name}: {task.get('name')}"


def test_vars_cover_the_role_inputs(tmp_path, locks):
    """Every variable envkit renders is one a role declares (no typo reaches a playbook silently)."""
    write_vendor(locks["old"], tmp_path / "vendor")
    v = render_vars(
        read_lock(locks["old"]),
        lock_path=locks["old"],
        bundle=locate_bundle(None, tmp_path / "vendor", _wheels(tmp_path / "wheels")),
    )
    declared = set()
    for role in ROLES:
        declared |= set(yaml.safe_load((role / "defaults" / "main.yml").read_text()))
    assert set(v) - {"envkit_lock"} <= declared, set(v) - declared


def test_syntax_check():
    ap = local_ansible_playbook()
    env = playbook_env(PLAYBOOKS)
    p = subprocess.run(
        [str(ap), "-i", "localhost,", "--syntax-check", str(PLAYBOOKS / "site.yml")],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert p.returncode == 0, p.stderr


def test_ansible_lint_offline():
    lint = shutil.which("ansible-lint") or (
        str(Path(sys.executable).parent / "ansible-lint") if (Path(sys.executable).parent / "ansible-lint").exists() else None
    )
    if not lint:
        pytest.skip("ansible-lint not installed")
    p = subprocess.run(
        [lint, "--offline", "-q", "."],
        cwd=PLAYBOOKS,
        capture_output=True,
        text=True,
        timeout=300,
        env={**playbook_env(PLAYBOOKS), "ANSIBLE_LINT_NODEPS": "1"},
    )
    assert p.returncode == 0, p.stdout + p.stderr


def test_cli_bad_inputs(tmp_path, locks):
    from typer.testing import CliRunner

    from envkit.cli import app

    inv = tmp_path / "inv.ini"
    inv.write_text("[a]\nh1\n")
    r = CliRunner().invoke(app, ["provision", "-i", str(inv), "--lock", str(locks["old"])])
    assert r.exit_code != 0 and "no vendor files" in str(r.exception)
    r = CliRunner().invoke(
        app, ["provision", "-i", str(tmp_path / "nope.ini"), "--lock", str(locks["old"]), "--artifacts", str(tmp_path)]
    )
    assert "no such inventory" in str(r.exception)


def _has_huawei_pci() -> bool:
    return any(p.read_text().strip().lower() == "0x19e5" for p in Path("/sys/bus/pci/devices").glob("*/vendor"))


def test_check_reports_the_preflight_warnings_in_text_and_json(tmp_path):
    """`envkit provision --check` against this host (local connection, no become, check mode: nothing changes): the
    preflight's warnings (no Huawei PCI device, another OS release than the lock's) appear under `warnings:` in the
    text summary and in each host's `warnings` of --json."""
    import platform

    local_ansible_playbook()  # envkit provision runs it
    if not Path("/etc/debian_version").is_file() or _has_huawei_pci():
        pytest.skip("needs a Debian-family host without a Huawei PCI device")
    lock = resolve_lock(tmp_path / "x.lock", "--cann", "8.3.RC1")
    if platform.machine() != "x86_64":
        lock = tmp_path / "x.lock"
        subprocess.run(
            [sys.executable, "-m", "envkit", "-q", "resolve", "--arch", platform.machine(), "--cann", "8.3.RC1", "-o", str(lock)],
            check=True,
            capture_output=True,
        )
    write_vendor(lock, tmp_path / "vendor")
    common = ["provision", "-i", "localhost,", "--lock", str(lock), "--artifacts", str(tmp_path / "vendor"), "--check"]
    local = [
        *("-e", "ansible_connection=local", "-e", f"ansible_python_interpreter={sys.executable}", "-e", "ansible_become=false"),
        *("-e", "envkit_preflight_require_kernel_headers=false", "-e", "envkit_preflight_min_free_gb=0"),
        *("-e", "envkit_preflight_manage_user=false", "-e", "envkit_preflight_lock_os=nosuchos1.0"),
    ]
    pci = "no Huawei PCI device (vendor 19e5) found"
    os_warning = re.compile(r"OS .+ is not the lock's nosuchos1\.0 \(same family\)")

    def envkit(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "envkit", *args],
            capture_output=True,
            text=True,
            timeout=300,
            cwd=tmp_path,
            env=playbook_env(PLAYBOOKS),
        )

    r = envkit(*common, *local, "--out", str(tmp_path / "text"))
    assert r.returncode == 0, r.stdout + r.stderr
    block = r.stdout.split("\nwarnings:\n", 1)[1].splitlines()
    assert f"  localhost: {pci}" in block and any(os_warning.fullmatch(line.removeprefix("  localhost: ")) for line in block)

    r = envkit(*common, *local, "--out", str(tmp_path / "json"), "--json")
    assert r.returncode == 0, r.stdout + r.stderr
    (host,) = json.loads(r.stdout)["hosts"]
    assert host["host"] == "localhost" and pci in host["warnings"], host
    assert [w for w in host["warnings"] if os_warning.fullmatch(w)], host["warnings"]  # lock's: no stray backslash


def test_summary_keeps_each_warning_once_and_no_all_passed():
    """The preflight check's message: its list of warnings, or ansible's 'All assertions passed' (no warning)."""
    from envkit.jobs.provision import PREFLIGHT_CHECK, format_warnings

    task = f"envkit_preflight : {PREFLIGHT_CHECK}"
    events = [
        {"event": "result", "host": "a", "task": task, "status": "ok", "msg": ["no Huawei PCI device (vendor 19e5) found"]},
        {"event": "result", "host": "a", "task": task, "status": "ok", "msg": ["no Huawei PCI device (vendor 19e5) found"]},
        {"event": "result", "host": "b", "task": task, "status": "ok", "msg": "All assertions passed"},
        {"event": "result", "host": "c", "task": "envkit_hdk : HDK | Report plan", "status": "ok", "msg": ["not a warning"]},
    ]
    s = summarize_provision(events)
    assert [s.hosts[h].warnings for h in "abc"] == [["no Huawei PCI device (vendor 19e5) found"], [], []]
    assert format_warnings(s) == ["warnings:", "  a: no Huawei PCI device (vendor 19e5) found"]
    assert s.hosts["a"].to_dict()["warnings"] == ["no Huawei PCI device (vendor 19e5) found"]
    assert format_warnings(summarize_provision(events[2:])) == []
    tasks = yaml.safe_load((PLAYBOOKS / "roles" / "envkit_preflight" / "tasks" / "main.yml").read_text())
    assert PREFLIGHT_CHECK in [t["name"] for t in tasks]


# --- the probe module and the OS families ------------------------------------------------------------
PROBE = PLAYBOOKS / "plugins" / "modules" / "envkit_probe.py"


def _in_subprocess(code: str):
    """Run Python that imports ansible.module_utils in a child process and return what it prints as JSON.

    Importing ansible.module_utils (ansible-core >= 2.19) patches sys.intern, socket and dataclasses for the
    whole process; a later `import torch._dynamo` in the same pytest process then fails, so the import stays
    out of this process."""
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout)


def test_probe_finds_kernel_headers_where_each_family_installs_them(tmp_path):
    deb, rhel, none = tmp_path / "deb", tmp_path / "rhel", tmp_path / "none"
    (deb / "lib/modules/6.1.0-18-amd64/build").mkdir(parents=True)
    (rhel / "usr/src/kernels/5.10.0-182.0.0.95.oe2203sp3.aarch64").mkdir(parents=True)  # kernel-devel on openEuler
    none.mkdir()
    cases = [("6.1.0-18-amd64", str(deb)), ("5.10.0-182.0.0.95.oe2203sp3.aarch64", str(rhel)), ("6.1.0-18-amd64", str(none))]
    got = _in_subprocess(
        "import importlib.util, json, sys\n"
        f"spec = importlib.util.spec_from_file_location('envkit_probe_under_test', {str(PROBE)!r})\n"
        "probe = importlib.util.module_from_spec(spec); spec.loader.exec_module(probe)\n"
        f"print(json.dumps([probe.kernel_headers(k, root) for k, root in {cases!r}]))\n"
    )
    assert got == ["/lib/modules/6.1.0-18-amd64/build", "/usr/src/kernels/5.10.0-182.0.0.95.oe2203sp3.aarch64", ""]


def test_os_families_follow_ansibles_own_distribution_map():
    """openEuler, Kylin and EulerOS are RedHat to Ansible's distribution facts (which the probe returns);
    the preflight maps that to the lock's `rhel` family, and Ubuntu/Debian to `debian`."""
    family_map = _in_subprocess(
        "import json; from ansible.module_utils.facts.system.distribution import Distribution; "
        "print(json.dumps({k: list(v) for k, v in Distribution.OS_FAMILY_MAP.items()}))"
    )
    families = yaml.safe_load((PLAYBOOKS / "roles/envkit_preflight/defaults/main.yml").read_text())[
        "envkit_preflight_os_families"
    ]
    ansible_family = {d: fam for fam, dists in family_map.items() for d in dists}
    for dist in ("openEuler", "Kylin Linux Advanced Server", "EulerOS", "RedHat", "CentOS"):
        assert ansible_family[dist] in families["rhel"], dist
    for dist in ("Ubuntu", "Debian"):
        assert ansible_family[dist] in families["debian"], dist


def test_roles_hold_no_debian_only_step():
    """No package manager is called (the targets are offline); a message naming packages names both families."""
    for tasks_file in PLAYBOOKS.glob("roles/*/tasks/*.yml"):
        text = tasks_file.read_text()
        for word in (
            "ansible.builtin.apt",
            "ansible.builtin.dnf",
            "ansible.builtin.yum",
            "ansible.builtin.package",
            "apt-get",
            "dpkg",
            "/etc/debian_version",
            "update-alternatives",
        ):
            assert word not in text, f"{tasks_file}: {word}"
    hints = yaml.safe_load((PLAYBOOKS / "roles/envkit_preflight/vars/main.yml").read_text())["envkit_preflight_headers_hint"]
    assert set(hints) == {"debian", "rhel"}
    assert "linux-headers-KVER" in hints["debian"]
    assert "kernel-devel-KVER" in hints["rhel"] and "/usr/src/kernels/KVER" in hints["rhel"]


def test_probe_module_runs_on_this_host(tmp_path):
    """The real module through Ansible (local connection): files read, stats, users, and the OS facts."""
    ansible = Path(sys.executable).parent / "ansible"
    if not ansible.exists():
        pytest.skip("ansible not installed beside this interpreter")
    (tmp_path / "version.info").write_text("Version=25.3.rc1\npackage_version=25.3.rc1\n")
    (tmp_path / "env").write_text("A=1\n")
    (tmp_path / "link").symlink_to(tmp_path / "env")
    args = json.dumps(
        {
            "install_path": str(tmp_path / "Ascend"),
            "npu_smi": False,
            "read": [str(tmp_path / "version.info"), str(tmp_path / "missing.info")],
            "stat": [str(tmp_path / "env"), str(tmp_path / "link"), str(tmp_path)],
            "users": ["root", "no-such-user-envkit"],
            "groups": ["root"],
        }
    )
    p = run_probe(str(ansible) + "-playbook", tmp_path, json.loads(args), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "result.json").read_text())
    assert res["changed"] is False
    facts = res["ansible_facts"]
    import platform

    assert facts["ansible_architecture"] == platform.machine()
    assert facts["ansible_os_family"] in ("Debian", "RedHat") and facts["ansible_distribution"]
    st = facts["envkit_state"]
    files = st["files"]
    assert files[str(tmp_path / "version.info")] == {"exists": True, "content": "Version=25.3.rc1\npackage_version=25.3.rc1\n"}
    assert files[str(tmp_path / "missing.info")]["exists"] is False
    import hashlib

    assert files[str(tmp_path / "env")]["checksum"] == hashlib.sha1(b"A=1\n").hexdigest()
    assert files[str(tmp_path / "link")]["islnk"] and files[str(tmp_path / "link")]["lnk_target"] == str(tmp_path / "env")
    assert files[str(tmp_path)]["isdir"]
    assert st["users"]["root"]["exists"] and st["users"]["root"]["uid"] == 0
    assert st["users"]["no-such-user-envkit"] == {"exists": False}
    assert st["groups"]["root"] == {"exists": True}
    assert st["free_kb"] > 0 and isinstance(st["busy_pids"], str)


@pytest.mark.parametrize("end", [True, False])
def test_the_probe_s_message_is_the_report_only_where_the_host_ends_its_play(tmp_path, end):
    """The real module through Ansible: where decide.end (nothing to do, no error, end_unchanged), the probe's own
    message is the host's report, which envkit provision reads from the probe's result (PROBE_TASK); elsewhere the
    probe has no message and the later tasks report."""
    import platform

    ansible = local_ansible_playbook()
    try:  # this host's family, so that the preflight finds no error here
        ids = {platform.freedesktop_os_release().get("ID", "")} | set(
            platform.freedesktop_os_release().get("ID_LIKE", "").split()
        )
    except OSError:
        ids = set()
    pre = {
        "host": "localhost",
        "lock_arch": platform.machine(),
        "lock_os_family": "debian" if ids & {"debian", "ubuntu"} else "rhel",
        "os_families": {
            "debian": ["Debian", "Ubuntu"],
            "rhel": ["RedHat", "openEuler", "Kylin", "EulerOS", "CentOS", "Rocky", "AlmaLinux"],
        },
        "min_free_gb": 0,
        "mirrors": [],
        "user": {"name": "root", "home": "/root", "manage": False},
        "end_unchanged": end,
    }
    args = {"install_path": str(tmp_path), "npu_smi": False, "hccn": False, "expect": {"preflight": pre}}
    p = run_probe(ansible, tmp_path, args, timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    res = json.loads((tmp_path / "result.json").read_text())
    decide = res["ansible_facts"]["envkit_state"]["decide"]
    assert decide["errors"] == [] and decide["unchanged"] is True and decide["end"] is end
    assert "report" not in decide  # sent once, as the message
    if end:
        assert res["msg"] == {"warnings": decide["warnings"], "network": {}}
    else:
        assert "msg" not in res


_DISTRIBUTION = """
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("envkit_probe", sys.argv[1])
probe = importlib.util.module_from_spec(spec)
spec.loader.exec_module(probe)


class Module:  # what the collector asks of AnsibleModule on the platforms that run a command (not Linux)
    def get_bin_path(self, *args, **kwargs):
        return None

    def run_command(self, *args, **kwargs):
        return 1, "", ""


if sys.argv[2] == "plain":
    from ansible.module_utils.facts.system.distribution import DistributionFactCollector
    facts = DistributionFactCollector().collect(module=Module())
else:
    if sys.argv[2] == "broken":  # the stand-in's import fails as on another layout: the plain import is the fallback
        sys.modules["ansible.module_utils.facts.system.distribution"] = None
    facts = probe.distribution_facts(Module())
print(json.dumps({"facts": facts, "every_collector": "ansible.module_utils.facts.default_collectors" in sys.modules}))
"""


def test_the_probe_s_distribution_facts_are_ansible_s_without_every_fact_collector():
    """envkit_probe reads the OS facts with Ansible's own DistributionFactCollector, the package's __init__ (which
    imports every platform's collectors) stood in for: the same facts on this host as the plain import, without
    importing the other collectors; where the stand-in fails, the plain import (in a subprocess each: importing
    ansible.module_utils in-process patches sys.intern)."""

    def run(how: str) -> dict:
        p = subprocess.run([sys.executable, "-c", _DISTRIBUTION, str(PROBE), how], capture_output=True, text=True, timeout=60)
        assert p.returncode == 0, p.stderr
        return json.loads(p.stdout)

    plain, fast, broken = run("plain"), run("stand-in"), run("broken")
    assert plain["facts"]["distribution"] and plain["facts"]["os_family"]
    assert fast["facts"] == plain["facts"] == broken["facts"]
    assert plain["every_collector"] and broken["every_collector"] and not fast["every_collector"]


def _tags(text: str) -> list[tuple[str, str]]:
    """(tag, value) of every scalar of a YAML text, as written (no constructor runs)."""
    out = []
    for node in yaml.compose(text).value:
        stack = [node]
        while stack:
            n = stack.pop()
            if isinstance(n, tuple):
                stack.extend(n)
            elif isinstance(n, yaml.MappingNode):
                stack.extend(n.value)
            elif isinstance(n, yaml.SequenceNode):
                stack.extend(n.value)
            else:
                out.append((n.tag, n.value))
    return out


HOSTILE = "{{ lookup('pipe', 'touch MARKER') }}"


def test_vars_file_marks_every_string_that_could_hold_jinja_unsafe(locks, tmp_path):
    """Every string of the vars file that could hold Jinja (a `{`) is `!unsafe`: Ansible never templates it.
    The others stay plain strings: ansible-core 2.19 loads `!unsafe '3.10'` as the float 3.1."""
    from envkit.executor.ansible import dump_vars

    write_vendor(locks["old"], tmp_path / "vendor")
    lock = read_lock(locks["old"])
    v = render_vars(
        lock,
        lock_path=locks["old"],
        bundle=locate_bundle(None, tmp_path / "vendor", _wheels(tmp_path / "wheels")),
    )
    v["envkit_cann_set_env"] = "/opt/{{ x }}"  # a value with Jinja markup, as a hostile bundle could bring
    text = dump_vars(v, "envkit provision")
    strings = _tags(text)
    assert not [(tag, value) for tag, value in strings if "{" in value and tag != "!unsafe"]
    assert ("!unsafe", "/opt/{{ x }}") in strings
    assert ("tag:yaml.org,2002:str", lock.stack.python) in strings
    top = {k.value: v for k, v in yaml.compose(text).value}
    assert top["envkit_python_lock_python"].value == lock.stack.python


def _yamllint() -> str:
    here = Path(sys.executable).parent / "yamllint"
    found = str(here) if here.exists() else shutil.which("yamllint")
    if not found:
        pytest.skip("yamllint not installed (it comes with ansible-lint, the test extra)")
    return found


def _lint(text: str, path: Path) -> subprocess.CompletedProcess:
    """yamllint with the playbooks' own settings (playbooks/.yamllint) on `text` written to `path`."""
    path.write_text(text)
    return subprocess.run(
        [_yamllint(), "-f", "parsable", "-c", str(PLAYBOOKS / ".yamllint"), str(path)], capture_output=True, text=True, timeout=60
    )


TRICKY = {
    "quotes": "it's \"quoted\" 'twice'",
    "colons": "key: value: more # not a comment",
    "unicode": "Grüße, 日本語, نوروز, \u2028 and \U0001f600",
    "jinja": "{{ lookup('pipe', 'id') }} {% if x %}{# c #}",
    "long_path": "/opt/" + "very-long-folder-name/" * 12 + "{{ x }}",
    "long_words": "word " * 50 + "x" * 230,
    "control": "tab\tnul\x00esc\x1b nl\n",
    "edge_spaces": " " * 170 + "a" + " " * 3,
    "versions": "3.10",
    "truthy": "yes",
    "octal": "0755",
}


def test_vars_file_passes_the_playbooks_yamllint_and_loads_back_unchanged(locks, tmp_path):
    """A vars file rendered from a lock, with values holding quotes, colons, unicode, Jinja markup, control characters
    and lines longer than yamllint allows, passes `yamllint -c playbooks/.yamllint`; it loads back to the same values,
    every string that could hold Jinja tagged `!unsafe` (the others plain strings, '3.10' no float)."""
    from envkit.executor.ansible import dump_vars

    write_vendor(locks["old"], tmp_path / "vendor")
    v = render_vars(
        read_lock(locks["old"]),
        lock_path=locks["old"],
        bundle=locate_bundle(None, tmp_path / "vendor", _wheels(tmp_path / "wheels")),
    )
    v["envkit_python_cann_env"] = {**v["envkit_python_cann_env"], **{f"ENVKIT_{k.upper()}": t for k, t in TRICKY.items()}}
    v["envkit_hdk_driver"] = {**v["envkit_hdk_driver"], "flags": [*v["envkit_hdk_driver"]["flags"], *TRICKY.values()]}
    v["envkit_cann_set_env"] = TRICKY["long_path"]
    text = dump_vars(v, f"envkit provision --lock {locks['old']}")
    r = _lint(text, tmp_path / "vars.yml")
    assert r.returncode == 0 and not r.stdout, r.stdout + r.stderr
    assert max(len(line) for line in text.splitlines()) <= 200

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!unsafe", lambda loader, node: ("!unsafe", loader.construct_scalar(node)))
    back = yaml.load(text, Loader=Loader)  # noqa: S506 - SafeLoader with one more tag
    assert back["envkit_python_cann_env"]["ENVKIT_JINJA"] == ("!unsafe", TRICKY["jinja"])
    assert back["envkit_cann_set_env"] == ("!unsafe", TRICKY["long_path"])
    assert back["envkit_hdk_driver"]["flags"][-len(TRICKY) :] == [("!unsafe", t) if "{" in t else t for t in TRICKY.values()]
    untagged = {k: w[1] if isinstance(w, tuple) else w for k, w in back["envkit_python_cann_env"].items()}
    assert untagged == v["envkit_python_cann_env"]
    assert back["envkit_python_lock_python"] == v["envkit_python_lock_python"] and isinstance(
        back["envkit_python_lock_python"], str
    )
    # the check is live: the same values as PyYAML writes them by default (lists not indented under their key) fail it
    r = _lint("---\n" + yaml.safe_dump(v, default_flow_style=False, width=4096), tmp_path / "plain.yml")
    assert r.returncode == 1 and "(indentation)" in r.stdout and "(line-length)" in r.stdout, r.stdout


def test_the_command_in_the_vars_header_stays_one_comment_line():
    """The header names the command, paths included: a newline in a path must not start a variable of its own."""
    from envkit.executor.ansible import dump_vars

    text = dump_vars({"envkit_a": "x"}, "envkit provision --lock 'a\nenvkit_smoke_enabled: false\r'")
    assert yaml.safe_load(text) == {"envkit_a": "x"}
    assert text.splitlines()[0] == "# GENERATED by `envkit provision --lock 'a\\x0aenvkit_smoke_enabled: false\\x0d'`"


def test_jinja_in_a_lock_value_is_never_evaluated_by_ansible(tmp_path):
    """The grammar refuses `{{ }}` in every lock string; the vars file holds even without it: a value with a
    pipe lookup reaches a task as text, and the marker the lookup would create never appears."""
    from envkit.executor.ansible import dump_vars

    ansible = Path(sys.executable).parent / "ansible-playbook"
    marker = tmp_path / "MARKER"
    hostile = HOSTILE.replace("MARKER", str(marker))
    text = dump_vars(
        {
            "envkit_hdk_driver": {"version": hostile, "flags": [hostile]},
            "envkit_python_lock_python": "3.10",
            "envkit_cann_set_env": hostile,
            "envkit_python_cann_env": {"X": hostile, "LONG": hostile + "/x" * 150},  # written on several lines
        },
        "test",
    )
    assert ("!unsafe", hostile) in _tags(text)
    if not ansible.exists():
        pytest.skip("ansible-playbook not installed beside this interpreter")
    (tmp_path / "vars.yml").write_text(text)
    play = tmp_path / "play.yml"
    write_play(
        play,
        [
            {
                "ansible.builtin.copy": {
                    "dest": str(tmp_path / "out.txt"),
                    "mode": "0600",
                    "content": "{{ envkit_hdk_driver.version }}|{{ envkit_hdk_driver.flags[0] }}|{{ envkit_cann_set_env }}|"
                    "{{ envkit_python_cann_env.X }}|{{ envkit_python_lock_python == '3.10' }}|{{ envkit_python_cann_env.LONG }}",
                }
            },
        ],
    )
    p = run_local_playbook(ansible, play, "-e", f"@{tmp_path / 'vars.yml'}", env=playbook_env(PLAYBOOKS), timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert (tmp_path / "out.txt").read_text() == "|".join([hostile] * 4 + ["True", hostile + "/x" * 150])
    assert not marker.exists()
