"""`envkit doctor` end to end on the fixture roots, on this host, and with a lock."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from .conftest import ROOTS

# scenario -> (exit code, the checks that must fail)
SCENARIOS = {
    "healthy-a2": (0, set()),
    "healthy-a3-cann9": (0, set()),
    "drifted-a2": (0, set()),
    "hazard-torch-npu-no-cann": (1, {"torch_npu without CANN"}),
    "hazard-cuda-torch": (1, {"CUDA torch with torch_npu"}),
    "hazard-numpy2": (1, {"numpy 2 where <2 is needed", "stack validation"}),
    "hazard-set-env": (1, {"set_env.sh not sourced"}),
    # driver 24.1.rc2.2 is validated as HDK 24.1.RC2 with the patch's own compatible_version_fw
    "hazard-fw-mismatch": (1, {"driver/firmware compatibility", "stack validation"}),
    "hazard-npu-held": (1, {"NPU held by another process"}),
    "hazard-device-used": (1, {"npu-smi", "NPU held by another process"}),
    "hazard-no-device-nodes": (1, {"npu devices"}),
    "hazard-triton-clash": (1, {"upstream triton beside triton-ascend"}),
    "garbled": (0, set()),
}


def test_every_fixture_root_has_a_scenario():
    roots = {p.name for p in ROOTS.iterdir() if p.is_dir()}
    assert roots == set(SCENARIOS) | {"image-910b-8.5"}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_json(name, root_copy, run_cli):
    code, failing = SCENARIOS[name]
    rc, out, _ = run_cli("doctor", "--root", str(root_copy(name)), "--json")
    doc = json.loads(out)
    assert set(doc) >= {"checks", "observed", "drift", "failures"}
    failed = {c["name"] for c in doc["checks"] if c["status"] == "fail"}
    assert (rc, failed) == (code, failing)
    assert len(doc["failures"]) == sum(c["status"] == "fail" for c in doc["checks"])
    for c in doc["checks"]:
        assert set(c) == {"name", "status", "detail", "fix"}
        if c["status"] == "fail":
            assert c["fix"], f"{c['name']} fails without a fix"


def test_healthy_a2_observed_stack(root_copy, run_cli):
    rc, out, _ = run_cli("doctor", "--root", str(root_copy("healthy-a2")), "--json")
    obs = json.loads(out)["observed"]
    assert {k: v["value"] for k, v in obs.items() if v} == {
        "driver": "25.5.0",
        "firmware": "25.5.0",
        "cann": "8.5.0",
        "chip": "910b",
        "arch": "aarch64",
        "os": "ubuntu22.04",
        "python": "3.11",
        "torch": "2.6.0",
        "torch_npu": "2.6.0.post5",
        "numpy": "1.26.4",
        "transformers": "5.24.0",
        "accelerate": "1.15.0",
    }
    assert obs["driver"]["source"] == "/usr/local/Ascend/driver/version.info"
    assert obs["firmware"]["details"]["firmware_version"] == "7.8.0.5.216"  # the 7.x one, kept apart
    assert obs["cann"]["details"]["layout"] == "cann-versioned"
    assert obs["cann"]["details"]["Ascend-cann-910b-ops"] == "8.5.0"
    assert obs["chip"]["source"] == "/var/log/envkit/npu-smi/info.txt (recorded output of npu-smi info)"
    assert json.loads(out)["validation"]["valid"] is True


def test_a3_and_cann9_layout(root_copy, run_cli):
    _, out, _ = run_cli("doctor", "--root", str(root_copy("healthy-a3-cann9")), "--json")
    obs = json.loads(out)["observed"]
    assert obs["chip"]["value"] == "a3"
    assert obs["chip"]["details"]["chips"] == "4" and obs["chip"]["details"]["npus"] == "2"
    assert obs["cann"]["value"] == "9.0.0" and obs["cann"]["details"]["layout"] == "cann"


def test_image_root_with_env_file(root_copy, run_cli):
    root = root_copy("image-910b-8.5")
    rc, out, _ = run_cli("doctor", "--root", str(root), "--json")
    doc = json.loads(out)
    set_env = next(c for c in doc["checks"] if c["name"] == "set_env.sh not sourced")
    assert (rc, set_env["status"]) == (0, "warn") and "--env-file" in set_env["fix"]
    rc, out, _ = run_cli("doctor", "--root", str(root), "--env-file", str(ROOTS / "image-910b-8.5.env"), "--json")
    doc = json.loads(out)
    assert rc == 0 and all(c["status"] == "ok" for c in doc["checks"]), [c for c in doc["checks"] if c["status"] != "ok"]
    devices = next(c for c in doc["checks"] if c["name"] == "npu devices")
    assert "run time" in devices["detail"]
    assert doc["observed"]["chip"]["value"] == "910b"  # from the operator package, no npu-smi in an image
    assert doc["observed"]["driver"] is None


def test_text_output_one_line_per_check(root_copy, run_cli):
    rc, out, err = run_cli("doctor", "--root", str(root_copy("hazard-fw-mismatch")))
    assert rc == 1
    line = next(ln for ln in out.splitlines() if "driver/firmware compatibility" in ln)
    assert line.startswith("FAIL") and "7.3.0.1.231" in line and "[7.0.0,7.2.99]" in line
    assert "Compatibility NOK" in line
    assert "fixes:" in out and "observed stack:" in out
    assert "probing" in err  # progress on stderr, results on stdout


def test_this_host_says_plainly_there_is_no_npu(run_cli):
    if Path("/dev/davinci0").exists():
        pytest.skip("this host has an Ascend NPU")
    rc, out, _ = run_cli("doctor", "--json")
    doc = json.loads(out)
    devices = next(c for c in doc["checks"] if c["name"] == "npu devices")
    assert devices["status"] == "warn"
    assert "this host has no Ascend NPU" in devices["detail"]
    assert rc in (0, 1)
    assert doc["observed"]["python"]["value"]  # the current interpreter was read


@pytest.mark.parametrize(
    "args, message",
    [
        (("--root", "/nonexistent/root"), "not a directory"),
        (("--python", "/nonexistent/python3"), "not an executable"),
        (("--lock", "/nonexistent/envkit.lock"), "no such file"),
        (("--env-file", "/nonexistent/env"), "no such file"),
    ],
)
def test_cannot_run_exits_2(args, message, run_cli):
    rc, out, err = run_cli("doctor", *args)
    assert rc == 2 and message in err


def test_cannot_run_json_error(run_cli):
    rc, out, _ = run_cli("doctor", "--root", "/nonexistent/root", "--json")
    assert rc == 2 and json.loads(out)["error"]["type"] == "CannotRun"


def test_python_inside_a_root(root_copy, run_cli):
    root = root_copy("healthy-a2")
    rc, _, err = run_cli("doctor", "--root", str(root), "--python", "/usr/bin/python9")
    assert rc == 2 and "no such file in" in err
    (root / "usr/local/python3.11.13/bin").mkdir(parents=True)
    (root / "usr/local/python3.11.13/bin/python3").write_text("")
    rc, out, _ = run_cli("doctor", "--root", str(root), "--python", "/usr/local/python3.11.13/bin/python3", "--json")
    assert rc == 0 and json.loads(out)["observed"]["torch_npu"]["value"] == "2.6.0.post5"


# --------------------------------------------------------------------------- drift from a lock


@pytest.fixture(scope="module")
def lock_a2_85(tmp_path_factory) -> Path:
    """A real lock for the healthy-a2 stack, written by the foundation's own lock writer."""
    from envkit.core.derive import build_lock
    from envkit.core.matrix import load_matrix
    from envkit.core.resolve import pins_from_mapping, solve
    from envkit.lock.file import write_lock

    lm = load_matrix()
    pins = pins_from_mapping(lm, dict(chip="910b", arch="aarch64", os="ubuntu22.04", python="3.11", cann="8.5.0", torch="2.6.0"))
    path = tmp_path_factory.mktemp("lock") / "envkit.lock"
    write_lock(build_lock(lm, solve(lm, pins), "tests"), path)
    return path


def test_no_drift_on_the_locked_host(root_copy, run_cli, lock_a2_85):
    rc, out, _ = run_cli("doctor", "--root", str(root_copy("healthy-a2")), "--lock", str(lock_a2_85), "--json")
    doc = json.loads(out)
    assert rc == 0
    assert [d["status"] for d in doc["drift"]] == ["match"] * 12
    assert next(c for c in doc["checks"] if c["name"] == "lock drift")["status"] == "ok"


def test_drift_component_by_component(root_copy, run_cli, lock_a2_85):
    rc, out, _ = run_cli("doctor", "--root", str(root_copy("drifted-a2")), "--lock", str(lock_a2_85), "--json")
    doc = json.loads(out)
    assert rc == 1 and [f for f in doc["failures"] if f.startswith("lock drift")]
    by = {d["component"]: d for d in doc["drift"]}
    assert {k for k, d in by.items() if d["status"] == "differs"} == {
        "driver",
        "firmware",
        "cann",
        "python",
        "torch",
        "torch_npu",
        "transformers",
    }
    assert (by["driver"]["locked"], by["driver"]["observed"]) == ("25.5.0", "24.1.rc3")
    assert by["cann"]["source"].endswith("ascend_toolkit_install.info")
    assert by["numpy"]["status"] == "match"


def test_drift_text_output(root_copy, run_cli, lock_a2_85):
    rc, out, _ = run_cli("doctor", "--root", str(root_copy("drifted-a2")), "--lock", str(lock_a2_85))
    assert rc == 1
    assert "drift from the lock:" in out
    assert any(ln.split()[:2] == ["torch_npu", "differs"] for ln in out.splitlines())
