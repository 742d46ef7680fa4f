"""The `vllm-ascend device build` hazard: the installed vllm_ascend's `_build_info.py` (read as a file, never
imported) against the chip of the NPUs the recorded `npu-smi info` lists (healthy-a3-cann9: `Ascend910`, two chips
per NPU -> a3; healthy-a2: 910B -> 910b)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from envkit.io.buildinfo import BUILD_INFO_MAX, build_facts
from envkit.jobs.doctor.diagnose import diagnose
from envkit.jobs.doctor.observe import probe

NAME = "vllm-ascend device build"
SITE = "usr/local/python3.11.13/lib/python3.11/site-packages"
FILE = f"/{SITE}/vllm_ascend/_build_info.py"


def _install(root: Path, build_info: str | bytes | None, version: str = "0.23.0") -> Path:
    """vllm 0.23.0 and vllm-ascend `version` (its platform plugin registered) in the root's site-packages, with
    `build_info` as its `vllm_ascend/_build_info.py` (None: no such file); the file's path."""
    site = root / SITE
    for name, ver, eps in (
        ("vllm", "0.23.0", None),
        ("vllm_ascend", version, "[vllm.platform_plugins]\nascend = vllm_ascend:register\n"),
    ):
        folder = site / f"{name}-{ver}.dist-info"
        folder.mkdir()
        (folder / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {ver}\n\n")
        if eps:
            (folder / "entry_points.txt").write_text(eps)
    (site / "vllm_ascend").mkdir()
    path = site / "vllm_ascend" / "_build_info.py"
    if isinstance(build_info, str):
        path.write_text(build_info)
    elif isinstance(build_info, bytes):
        path.write_bytes(build_info)
    return path


def _check(root: Path):
    found = [c for c in diagnose(probe(str(root), timeout=10)).checks if c.name == NAME]
    assert len(found) == 1
    return found[0]


A2 = "# Auto-generated file\n__device_type__ = 'A2'\n"


def test_an_a2_build_on_a3_npus_fails_naming_both_chips_the_file_and_the_vendors_ways(root_copy, run_cli):
    root = root_copy("healthy-a3-cann9")
    _install(root, A2)
    c = _check(root)
    assert c.status == "fail"
    assert "built for chip 910b" in c.detail and "NPUs here are chip a3" in c.detail
    assert f"{FILE}: __device_type__ = 'A2'" in c.detail and "check_ascend_device_type" in c.detail
    assert "quay.io/ascend/vllm-ascend:v0.23.0-a3" in c.fix and "SOC_VERSION" in c.fix and "ascend910_93*" in c.fix
    rc, out, _ = run_cli("doctor", "--root", str(root), "--json")
    assert rc == 1
    checks = {c["name"]: c for c in json.loads(out)["checks"]}
    assert checks[NAME]["status"] == "fail" and "quay.io/ascend/vllm-ascend:v0.23.0-a3" in checks[NAME]["fix"]


def test_a_build_for_the_npus_chip_passes_and_the_doctor_exits_0(root_copy, run_cli):
    """The same A3 root with an A3 build: ok, and nothing else fails (the fail above is this hazard's)."""
    root = root_copy("healthy-a3-cann9")
    _install(root, "__device_type__ = 'A3'\n")
    c = _check(root)
    assert c.status == "ok" and "built for chip a3" in c.detail
    rc, _, _ = run_cli("doctor", "--root", str(root), "--json")
    assert rc == 0


def test_an_a2_build_on_910b_npus_is_ok(root_copy):
    root = root_copy("healthy-a2")
    _install(root, A2)
    c = _check(root)
    assert c.status == "ok" and "chip 910b" in c.detail and "__device_type__ = 'A2'" in c.detail


@pytest.mark.parametrize(
    ("text", "a3_status"),
    [
        ("__soc_version__ = 'ASCEND910B1'\n", "fail"),  # an older build: its SOC_VERSION, family ascend910b
        ("__soc_version__ = 'Ascend910_9391'\n", "ok"),  # an A3 SOC_VERSION (case does not matter)
        ("__device_type__ = '_910B'\n", "fail"),  # the enum's name before 0.13
        ("__device_type__ = '_910_93'\n", "ok"),
    ],
)
def test_older_builds_map_through_the_matrix(root_copy, text, a3_status):
    root = root_copy("healthy-a3-cann9")
    _install(root, text, version="0.11.0")
    c = _check(root)
    assert c.status == a3_status, c.detail
    if a3_status == "fail":
        assert "built for chip 910b" in c.detail and text.split(" = ")[1].strip() in c.detail


def test_no_build_info_is_a_build_for_any_device(root_copy):
    root = root_copy("healthy-a3-cann9")
    _install(root, None)
    c = _check(root)
    assert c.status == "ok" and f"no {FILE}" in c.detail


def test_a_device_type_the_matrix_does_not_map_warns(root_copy):
    root = root_copy("healthy-a3-cann9")
    _install(root, "__device_type__ = 'A9'\n")
    c = _check(root)
    assert c.status == "warn" and "'A9'" in c.detail and "does not know" in c.detail and "chip a3" in c.detail


def test_no_npu_seen_is_not_checked(root_copy):
    root = root_copy("healthy-a3-cann9")
    (root / "var/log/envkit/npu-smi/info.txt").unlink()
    _install(root, A2)
    c = _check(root)
    assert c.status == "ok" and c.detail.startswith("not checked") and "chip 910b" in c.detail


def test_not_installed_gives_no_check(root_copy):
    checks = diagnose(probe(str(root_copy("healthy-a3-cann9")), timeout=10)).checks
    assert NAME not in {c.name for c in checks}


def test_a_build_info_that_calls_code_is_read_as_data_and_nothing_runs(root_copy, tmp_path):
    marker = tmp_path / "ran"
    root = root_copy("healthy-a3-cann9")
    _install(root, f"open({str(marker)!r}, 'w').close()\n__device_type__ = __import__('os').getenv('X', 'A3')\n")
    c = _check(root)
    assert c.status == "warn" and c.detail.startswith(f"unparsed: {FILE}") and "not a plain name" in c.detail
    assert not marker.exists()


@pytest.mark.parametrize(
    ("content", "why"),
    [
        ("__device_type__ = 'A3'\n" + "#" * BUILD_INFO_MAX, "too large"),
        (b"__device_type__ = '\xff\xfe'\n", "not UTF-8"),
        ("__device_type__ = 'A3\n", "is not Python"),
        ("__device_type__ = '" + "A" * 40 + "'\n", "not a plain name"),
        ("__device_type__ = 'A3; rm -rf /'\n", "not a plain name"),
        ("x = (" * 200 + ")" * 200 + "\n__device_type__ = 'A3'\n", "not Python"),
        ("__device_type__ = 'A3'\x00\n", "not Python"),
    ],
)
def test_a_hostile_build_info_warns_and_never_crashes(root_copy, content, why):
    root = root_copy("healthy-a3-cann9")
    _install(root, content)
    c = _check(root)
    assert c.status == "warn" and FILE in c.detail and why in c.detail, c.detail


def test_a_fifo_is_refused_unopened(root_copy):
    root = root_copy("healthy-a3-cann9")
    path = _install(root, None)
    os.mkfifo(path)
    c = _check(root)  # an open() of a FIFO without a writer would wait forever
    assert c.status == "warn" and c.detail.startswith(f"unreadable: {FILE}") and "FIFO" in c.detail


def test_a_link_out_of_the_root_stays_inside_it(root_copy, tmp_path):
    """An absolute link resolves inside the root: the host's file with an A3 build is never read."""
    outside = tmp_path / "outside_build_info.py"
    outside.write_text("__device_type__ = 'A3'\n")
    root = root_copy("healthy-a3-cann9")
    path = _install(root, None)
    path.symlink_to(outside)
    c = _check(root)
    assert c.status == "ok" and f"no {FILE}" in c.detail and "A3" not in c.detail


def test_the_parser_takes_string_literals_of_plain_assignments_only():
    assert build_facts("__device_type__ = 'A2'\n__soc_version__ = 'ASCEND910B1'\n", "f") == {
        "device_type": "A2",
        "soc_version": "ASCEND910B1",
    }
    assert build_facts("if True:\n    __device_type__ = 'A3'\n__x__ = 'A3'\n", "f") == {
        "device_type": None,
        "soc_version": None,
    }


def test_on_a_host_the_file_beside_the_interpreters_package_is_read_never_imported(tmp_path):
    """Host mode: the interpreter's metadata probe gives vllm_ascend's site-packages; the build file is read there
    as bytes (a package whose import would run code stays unimported)."""
    import sys

    from envkit.jobs.doctor.observe import Target, _python_from_host, _vllm_ascend_build

    marker = tmp_path / "imported"
    site = tmp_path / "site"
    (site / "vllm_ascend").mkdir(parents=True)
    (site / "vllm_ascend" / "__init__.py").write_text(f"open({str(marker)!r}, 'w').close()\n")
    (site / "vllm_ascend" / "_build_info.py").write_text(f"open({str(marker)!r}, 'w').close()\n{A2}")
    dist = site / "vllm_ascend-0.23.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: vllm_ascend\nVersion: 0.23.0\n")
    (dist / "RECORD").write_text("")
    py = _python_from_host(sys.executable, {"PYTHONPATH": str(site), "PATH": os.environ.get("PATH", "")}, timeout=30)
    assert py.error is None, py.error
    ev = _vllm_ascend_build(Target("/"), py)
    assert ev is not None and ev.source == str(site / "vllm_ascend" / "_build_info.py")
    assert ev.data is not None and b"__device_type__ = 'A2'" in ev.data
    assert not marker.exists()


def test_the_fix_for_950_npus_names_the_a5_image_the_950dt_quick_start_pulls():
    """matrices/serving.yaml: the 0.30.0rc2 quick start pulls quay.io/ascend/vllm-ascend:<version>-a5 for 950DT."""
    from envkit.jobs.doctor.hazards import _device_build_fix

    fix = _device_build_fix("0.30.0rc2", "950")
    assert "quay.io/ascend/vllm-ascend:v0.30.0rc2-a5" in fix and "ascend950*" in fix
    assert "image" not in _device_build_fix("0.30.0rc2", "310b")  # no family: no image named
