"""Attacks on output folders, through every writing command: `launch render -o`, `launch profile -o`, `image
render -o`, `bundle build -o`, `smoke --out`, `matrix refresh --record`, `provision --out`.

Each attack prepares what is at the output (a user's folder, a planted marker or manifest, an owned folder with a
user's file added or a listed file swapped for a link out, the command's own inputs inside it) and runs the real
command (in-process, its error boundary included). Common assertions: exit 2 with each offending file named and no
traceback when refused, every file of the user's and every input byte for byte and inode for inode as it was,
nothing written outside the output. Ansible (`launch profile`, `provision`) and PyPI (`matrix refresh`) are
replaced by fakes that write what they would; every other command runs whole."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import urllib.error
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from envkit.io.outputs import BUNDLE, IMAGE_CONTEXT, KINDS, LAUNCH_PROFILE, LAUNCH_SET, OUTPUT_MARKER, SMOKE, write_output
from tests.airgap.conftest import offline_lock  # noqa: F401 - a fixture: a lock with a small closure served locally

from . import snapshot_files

ROOT = Path(__file__).resolve().parents[2]
HCCN = ROOT / "tests" / "fixtures" / "hccn"
SNAPSHOT = ROOT / "tests" / "fixtures" / "pypi-snapshot"
NOTES = "my-notes.txt"
MINE = b"the user's own work\n"


@dataclass
class Command:
    """One writing command: how to make its inputs in a folder, and how to run it into an output."""

    name: str
    kind: str
    prepare: Callable[[Path], list[Path]]  # its inputs, written into the folder given
    run: Callable[..., object]  # run(inputs_folder, out, *extra) -> Result
    collide: list[str]  # files it writes, which a user's folder may hold too
    force: bool = True  # has --force
    whole: bool = False  # replaced whole (a bundle folder)
    varies: set[str] = field(default_factory=set)  # files that differ from run to run (timings)


def _snapshot(folder: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry under `folder`: (content or link target, inode), links never followed."""
    out = {}
    for p in sorted(folder.rglob("*")):
        st = os.lstat(p)
        if p.is_symlink():
            out[str(p.relative_to(folder))] = (os.readlink(p), st.st_ino)
        elif p.is_file():
            out[str(p.relative_to(folder))] = (p.read_bytes(), st.st_ino)
    return out


def _listed(out: Path) -> set[str]:
    return {f["path"] for f in json.loads((out / OUTPUT_MARKER).read_text())["files"]}


def _refused(r, out: Path, *named: str) -> None:
    assert r.code == 2, (r.code, r.out, r.err)
    assert str(out) in r.err and "Traceback" not in r.err, r.err
    assert "refusing" in r.err, r.err
    assert all(n in r.err for n in named), (named, r.err)


# --- the commands ------------------------------------------------------------------------------------
INVENTORY = """[ascend]
node-a ansible_host=192.0.2.11 envkit_hccn_conf=a2_node0.hccn.conf
node-b ansible_host=192.0.2.12 envkit_hccn_conf=a2_node1.hccn.conf
"""


def _launch_render(request, run_cli) -> Command:
    from tests.launch.conftest import resolve_lock

    lock = request.getfixturevalue("tmp_path_factory").mktemp("lock") / "910b.lock"
    resolve_lock("910b", lock)

    def prepare(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        for name in ("a2_node0.hccn.conf", "a2_node1.hccn.conf"):
            shutil.copy(HCCN / name, folder / name)
        (folder / "hosts.ini").write_text(INVENTORY)
        shutil.copy(lock, folder / "envkit.lock")
        return [folder / n for n in ("a2_node0.hccn.conf", "a2_node1.hccn.conf", "hosts.ini", "envkit.lock")]

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli(
            "launch", "render", "-i", str(inputs / "hosts.ini"), "--lock", str(inputs / "envkit.lock"), "-o", str(out), *extra
        )

    return Command("launch render", LAUNCH_SET, prepare, run, ["rank_table.json", "launch.json"])


def _image_render(request, run_cli) -> Command:
    from tests.image.conftest import GOLDEN_CASES, fake_requirements, fixture_installers, resolve_lock

    base = request.getfixturevalue("tmp_path_factory").mktemp("image-inputs")
    lock = resolve_lock(GOLDEN_CASES["910b-aarch64-cann8.0.0"], base / "envkit.lock")
    arts = fixture_installers(lock, base / "artifacts")
    reqs = fake_requirements(lock, base / "requirements.txt")

    def prepare(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(lock, folder / "envkit.lock")  # where the context puts its own copy: the same bytes
        shutil.copytree(arts, folder / "vendor")
        shutil.copy(reqs, folder / "requirements.txt")
        return [folder / "envkit.lock", *sorted((folder / "vendor").iterdir()), folder / "requirements.txt"]

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli(
            "image",
            "render",
            "--lock",
            str(inputs / "envkit.lock"),
            "--artifacts",
            str(inputs / "vendor"),
            "--requirements",
            str(inputs / "requirements.txt"),
            "-o",
            str(out),
            *extra,
        )

    return Command("image render", IMAGE_CONTEXT, prepare, run, ["Dockerfile", "envkit.lock"])


def _bundle_build(request, run_cli) -> Command:
    lock, _ = request.getfixturevalue("offline_lock")

    def prepare(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(lock, folder / "bundle.lock")
        return [folder / "bundle.lock"]

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli("bundle", "build", "--lock", str(inputs / "bundle.lock"), "-o", str(out), *extra)

    return Command("bundle build", BUNDLE, prepare, run, ["install.sh", "manifest.json"], whole=True)


def _smoke(request, run_cli) -> Command:
    pytest.importorskip("torch")
    pytest.importorskip("transformers")
    from envkit.jobs.smoke.model import ensure_tiny_model

    model = ensure_tiny_model()

    def prepare(folder: Path) -> list[Path]:
        shutil.copytree(model, folder / "model")
        return sorted((folder / "model").iterdir())

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli(
            "smoke",
            "--device",
            "cpu",
            "--dtype",
            "fp32",
            "--repeat",
            "1",
            "--model",
            str(inputs / "model"),
            "--out",
            str(out),
            *extra,
        )

    return Command("smoke", SMOKE, prepare, run, ["report.json", "logits.safetensors"], force=False, varies={"report.json"})


def _fake_profile(argv, env, *, on_event=None, events_log=None, stderr_log=None):
    """What `ansible-playbook collectives.yml` leaves: each host's profile fetched into the local folder, its logs."""
    from envkit.executor.ansible import RunResult

    stage = Path(stderr_log).parent
    Path(events_log).write_text('{"event": "stats"}\n')
    Path(stderr_log).write_text("ansible's stderr\n")
    if os.environ.get("FAKE_ANSIBLE_FAILS") != "1":
        base = {
            "format": "envkit-collectives/1",
            "world": 2,
            "sizes": [8192],
            "ops": ["all_reduce"],
            "backend": "gloo",
            "nnodes": 2,
        }
        for rank, host in enumerate(("h0", "h1")):
            row = {"rank": rank, "results": [{"op": "all_reduce", "size": 8192, "seconds": 1e-3, "iters": 1, "correct": True}]}
            (stage / "hosts" / host).mkdir(parents=True, exist_ok=True)
            (stage / "hosts" / host / "profile.json").write_text(json.dumps({**base, "ranks": [row], "node_rank": rank}))
    return RunResult(returncode=0, events=[], stderr="")


def _launch_profile(request, run_cli) -> Command:
    request.getfixturevalue("monkeypatch").setattr("envkit.executor.ansible.run_playbook", _fake_profile)

    def prepare(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "inv.ini").write_text("[fleet]\nh0 ansible_host=127.0.0.1\nh1 ansible_host=127.0.0.1\n")
        return [folder / "inv.ini"]

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli("launch", "profile", "-i", str(inputs / "inv.ini"), "--port", "29611", "-o", str(out), *extra)

    return Command("launch profile", LAUNCH_PROFILE, prepare, run, ["vars.yml", "ansible.log", "profile.json"], force=False)


def _fake_site(argv, env, *, on_event=None, events_log=None, stderr_log=None):
    """What `ansible-playbook site.yml` leaves: its logs, the host's reports fetched, one converged host."""
    from envkit.executor.ansible import RunResult

    Path(events_log).write_text('{"event": "stats"}\n')
    Path(stderr_log).write_text("ansible's stderr\n")
    vars_file = Path(next(a for a in argv if a.startswith("@"))[1:])
    (vars_file.parent / "reports" / "h1").mkdir(parents=True, exist_ok=True)
    (vars_file.parent / "reports" / "h1" / "smoke.json").write_text('{"ok": true}\n')
    stats = {"h1": {"ok": 3, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 0}}
    return RunResult(returncode=0, events=[{"event": "stats", "hosts": stats}], stderr="")


def _provision(request, run_cli) -> Command:
    from tests.provision.fleet import resolve_lock, write_vendor

    request.getfixturevalue("monkeypatch").setattr("envkit.executor.ansible.run_playbook", _fake_site)
    base = request.getfixturevalue("tmp_path_factory").mktemp("provision-inputs")
    lock = resolve_lock(base / "old.lock", "--cann", "8.3.RC1")

    def prepare(folder: Path) -> list[Path]:
        folder.mkdir(parents=True, exist_ok=True)
        shutil.copy(lock, folder / "envkit.lock")
        write_vendor(folder / "envkit.lock", folder / "vendor")
        (folder / "inv.ini").write_text("[a]\nh1\n")
        return [folder / "envkit.lock", folder / "inv.ini", *sorted((folder / "vendor").iterdir())]

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli(
            "provision",
            "-i",
            str(inputs / "inv.ini"),
            "--lock",
            str(inputs / "envkit.lock"),
            "--artifacts",
            str(inputs / "vendor"),
            "--out",
            str(out),
            *extra,
        )

    return Command("provision", "provision", prepare, run, ["vars.yml", "ansible.log"], force=False)


def _fake_pypi(self, url, headers=None, limit=None):
    """PyPI's JSON API answered from the recorded snapshot (the URLs of the files added back), and its files."""
    from envkit.jobs.matrix import refresh

    if url.startswith("https://files.example/"):
        return snapshot_files.ranged(snapshot_files.file_body(url.rsplit("/", 1)[1]), headers)
    parts = url.removeprefix(refresh.PYPI + "/pypi/").removesuffix("/json").split("/")
    if len(parts) == 1:
        doc = json.loads((SNAPSHOT / f"{parts[0]}.json").read_text())
        for files in doc["releases"].values():
            for f in files:
                f["url"] = "https://files.example/" + f["filename"]
        return json.dumps(doc).encode()
    path = SNAPSHOT / parts[0] / f"{parts[1]}.json"
    if not path.is_file():
        raise urllib.error.HTTPError(url, 404, "not found", None, None)  # type: ignore[arg-type]
    return path.read_bytes()


def _matrix_refresh(request, run_cli) -> Command:
    from envkit.resources import matrices_dir

    mp = request.getfixturevalue("monkeypatch")
    mp.setattr("envkit.jobs.matrix.refresh.Source._get", _fake_pypi)
    mp.setenv("SOURCE_DATE_EPOCH", "1796342400")  # 2026-12-04, the snapshot's day

    def prepare(folder: Path) -> list[Path]:
        shutil.copytree(matrices_dir(), folder / "matrices")
        return sorted((folder / "matrices").rglob("*"))

    def run(inputs: Path, out: Path, *extra: str):
        return run_cli("matrix", "refresh", "--matrix-dir", str(inputs / "matrices"), "--record", str(out), *extra)

    return Command("matrix refresh --record", "pypi-snapshot", prepare, run, ["torch.json", "_recorded.json"], force=False)


COMMANDS = {
    "launch-render": _launch_render,
    "image-render": _image_render,
    "bundle-build": _bundle_build,
    "smoke": _smoke,
    "launch-profile": _launch_profile,
    "provision": _provision,
    "matrix-refresh-record": _matrix_refresh,
}
QUICK = [c for c in COMMANDS if c != "smoke"]  # smoke runs its model (a minute here): once, inputs inside


@pytest.fixture(params=list(COMMANDS))
def cmd(request, run_cli) -> Command:
    """Every writing command (in the attacks refused before the command runs: smoke loads no model)."""
    return COMMANDS[request.param](request, run_cli)


@pytest.fixture(params=[pytest.param(c, marks=[pytest.mark.slow] if c == "smoke" else []) for c in COMMANDS])
def running(request, run_cli) -> Command:
    """Every writing command, run whole (smoke's model run is slow)."""
    return COMMANDS[request.param](request, run_cli)


@pytest.fixture(params=QUICK)
def quick(request, run_cli) -> Command:
    return COMMANDS[request.param](request, run_cli)


def _inputs(c: Command, tmp_path: Path) -> Path:
    folder = tmp_path / "inputs"
    if not folder.exists():
        c.prepare(folder)
    return folder


def _owned(c: Command, tmp_path: Path, out: Path) -> Path:
    """An earlier output of the command at `out` (smoke's is written as its manifest says, without the model run)."""
    inputs = _inputs(c, tmp_path)
    if c.kind == SMOKE:
        write_output(out, SMOKE, {"report.json": "{}\n", "logits.safetensors": b"\0" * 64})
        return inputs
    r = c.run(inputs, out)
    assert r.code == 0, (r.out, r.err)
    return inputs


# --- a folder that is not the command's ------------------------------------------------------------
def test_a_users_folder_is_refused_and_forced_only_beside_the_users_files(cmd, tmp_path):
    """The user's folder holds files named as the command's outputs (the profile's vars.yml and ansible.log...)."""
    out = tmp_path / "out"
    out.mkdir()
    (out / NOTES).write_bytes(MINE)
    for name in cmd.collide:
        (out / name).write_bytes(MINE)
    before = _snapshot(out)
    _refused(cmd.run(_inputs(cmd, tmp_path), out), out, NOTES, *cmd.collide)
    assert _snapshot(out) == before
    if cmd.force:  # a file of theirs where the command writes: refused, --force or not
        _refused(cmd.run(_inputs(cmd, tmp_path), out, "--force"), out, *cmd.collide)
        assert _snapshot(out) == before


def test_force_writes_beside_a_users_file_and_never_deletes_it(quick, tmp_path):
    if not quick.force:
        pytest.skip(f"{quick.name} has no --force")
    inputs = _inputs(quick, tmp_path)
    out = tmp_path / "out"
    out.mkdir()
    (out / "sub").mkdir()
    (out / "sub" / NOTES).write_bytes(MINE)
    r = quick.run(inputs, out, "--force")
    if quick.whole:  # a bundle folder is replaced whole: nothing of the user's may be in it
        _refused(r, out, f"sub/{NOTES}")
        assert sorted(p.name for p in out.rglob("*")) == ["my-notes.txt", "sub"]
        return
    assert r.code == 0, r.err
    assert (out / "sub" / NOTES).read_bytes() == MINE and f"sub/{NOTES}" not in _listed(out)
    r = quick.run(inputs, out, "--force")  # and again
    assert r.code == 0 and (out / "sub" / NOTES).read_bytes() == MINE


@pytest.mark.parametrize("marker", ["own kind", "other kind"])
def test_a_planted_kind_only_marker_gives_nothing_away(cmd, tmp_path, marker):
    """An earlier envkit's marker (the kind alone) beside a user's files: the folder stays the user's."""
    out = tmp_path / "out"
    out.mkdir()
    for name in [NOTES, *cmd.collide]:
        (out / name).write_bytes(MINE)
    other = LAUNCH_SET if cmd.kind != LAUNCH_SET else IMAGE_CONTEXT
    (out / OUTPUT_MARKER).write_text((cmd.kind if marker == "own kind" else other) + "\n")
    before = _snapshot(out)
    extra = ("--force",) if cmd.force else ()
    r = cmd.run(_inputs(cmd, tmp_path), out, *extra)
    if marker == "other kind" and not cmd.whole:
        _refused(r, out, f"is an envkit {KINDS[other]}")
    else:
        _refused(r, out, *cmd.collide)
    assert _snapshot(out) == before


def test_a_folder_of_another_kind_is_refused(cmd, tmp_path):
    out = tmp_path / "out"
    other = SMOKE if cmd.kind != SMOKE else LAUNCH_SET
    write_output(out, other, {"report.json": "{}\n", "hosts/a/run.sh": "#!/bin/sh\n"})
    before = _snapshot(out)
    r = cmd.run(_inputs(cmd, tmp_path), out)
    _refused(r, out)
    assert _snapshot(out) == before


@pytest.mark.parametrize("where", ["../victim.txt", "ABSOLUTE"])
def test_a_manifest_listing_a_path_outside_deletes_nothing(cmd, tmp_path, where):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(MINE)
    path = str(victim) if where == "ABSOLUTE" else where
    entry = {"path": path, "sha256": hashlib.sha256(MINE).hexdigest(), "size": len(MINE)}
    out = tmp_path / "out"
    out.mkdir()
    (out / cmd.collide[0]).write_bytes(MINE)
    (out / OUTPUT_MARKER).write_text(json.dumps({"envkit_output": 1, "kind": cmd.kind, "files": [entry]}))
    before = _snapshot(out)
    _refused(cmd.run(_inputs(cmd, tmp_path), out), out, cmd.collide[0])
    assert victim.read_bytes() == MINE and _snapshot(out) == before


def test_a_listed_file_whose_content_changed_is_never_replaced(cmd, tmp_path):
    """A planted manifest listing the user's file with another hash; for a bundle, a file of a real one edited."""
    out = tmp_path / "out"
    if cmd.whole:
        inputs = _owned(cmd, tmp_path, out)
    else:
        inputs = _inputs(cmd, tmp_path)
        out.mkdir()
        wrong = {"path": cmd.collide[0], "sha256": "0" * 64, "size": len(MINE)}
        (out / OUTPUT_MARKER).write_text(json.dumps({"envkit_output": 1, "kind": cmd.kind, "files": [wrong]}))
    (out / cmd.collide[0]).write_bytes(MINE)
    before = _snapshot(out)
    _refused(cmd.run(inputs, out), out, f"{cmd.collide[0]} (changed since envkit wrote it)")
    assert _snapshot(out) == before
    if cmd.force:
        _refused(cmd.run(_inputs(cmd, tmp_path), out, "--force"), out, cmd.collide[0])
        assert _snapshot(out) == before


# --- an output of the command, tampered with ----------------------------------------------------------
def test_a_users_file_added_to_an_owned_folder_is_kept(cmd, tmp_path):
    out = tmp_path / "out"
    inputs = _owned(cmd, tmp_path, out)
    (out / NOTES).write_bytes(MINE)
    before = _snapshot(out)
    _refused(cmd.run(inputs, out), out, f"{NOTES} (not written by envkit)")
    assert _snapshot(out) == before


def test_a_link_in_place_of_a_listed_file_is_never_followed(cmd, tmp_path):
    victim = tmp_path / "victim.txt"
    victim.write_bytes(MINE)
    out = tmp_path / "out"
    inputs = _owned(cmd, tmp_path, out)
    listed = sorted(_listed(out)) if cmd.kind != BUNDLE else ["install.sh"]
    target = next(n for n in listed if n in cmd.collide) if set(listed) & set(cmd.collide) else listed[0]
    (out / target).unlink()
    (out / target).symlink_to(victim)
    before, beside = _snapshot(out), sorted(p.name for p in tmp_path.iterdir())
    _refused(cmd.run(inputs, out), out, target)
    if cmd.force:
        _refused(cmd.run(_inputs(cmd, tmp_path), out, "--force"), out, target)
    assert victim.read_bytes() == MINE and _snapshot(out) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == beside  # nothing written beside the output either


# --- what the command is given and does again ----------------------------------------------------------
def test_a_second_identical_run_leaves_the_same_bytes(quick, tmp_path):
    inputs = _inputs(quick, tmp_path)
    out = tmp_path / "out"
    assert (r := quick.run(inputs, out)).code == 0, r.err
    first = {k: v[0] for k, v in _snapshot(out).items()}
    assert (r := quick.run(inputs, out)).code == 0, r.err
    assert {k: v[0] for k, v in _snapshot(out).items()} == first
    if quick.kind != BUNDLE:
        assert _listed(out) == set(first) - {OUTPUT_MARKER}  # every file there is one envkit wrote


def test_inputs_inside_the_output_are_never_touched(running, tmp_path):
    """The inventory, hccn.conf files, lock, vendor packages, model or matrices given from inside the output."""
    out = tmp_path / "out"
    inputs = running.prepare(out)
    before = _snapshot(out)
    r = running.run(out, out)
    if running.whole:  # replaced whole: refused, the inputs named
        _refused(r, out, "inputs of this command", "bundle.lock")
        assert _snapshot(out) == before
        return
    assert r.code == 0, (r.out, r.err)
    first = _snapshot(out)
    r = running.run(out, out)  # a second run with the same inputs: the same output
    assert r.code == 0, (r.out, r.err)
    after = _snapshot(out)
    for p in inputs:
        rel = str(p.relative_to(out))
        if rel in before:
            assert after[rel] == before[rel], rel  # the same bytes, the same inode: never replaced
            assert rel not in _listed(out), rel  # and never envkit's
    same = {k for k in first if k not in running.varies and not (running.varies and k == OUTPUT_MARKER)}
    assert {k: after[k][0] for k in same} == {k: first[k][0] for k in same} and set(after) == set(first)


# --- one command's own promises ----------------------------------------------------------------------
def test_a_failed_profile_run_leaves_the_earlier_profile_as_it_was(tmp_path, run_cli, request, monkeypatch):
    c = _launch_profile(request, run_cli)
    out = tmp_path / "out"
    inputs = _owned(c, tmp_path, out)
    before = _snapshot(out)
    assert {"vars.yml", "ansible.log", "events.jsonl", "profile.json", "hosts/h0/profile.json"} <= set(before)
    monkeypatch.setenv("FAKE_ANSIBLE_FAILS", "1")
    r = c.run(inputs, out)
    assert r.code == 2 and "h0: no profile" in r.err and str(out / "failed" / "ansible.log") in r.err, r.err
    after = _snapshot(out)
    assert {k: v for k, v in after.items() if not k.startswith("failed/") and k != OUTPUT_MARKER} == {
        k: v for k, v in before.items() if k != OUTPUT_MARKER
    }
    assert (out / "failed" / "ansible.log").read_text() == "ansible's stderr\n" and "failed/vars.yml" in _listed(out)
    monkeypatch.delenv("FAKE_ANSIBLE_FAILS")
    assert c.run(inputs, out).code == 0  # a run that succeeds: failed/ goes
    assert not (out / "failed").exists() and not any(n.startswith("failed/") for n in _listed(out))


def test_a_new_profile_folder_of_a_failed_run_holds_only_the_failed_logs(tmp_path, run_cli, request, monkeypatch):
    c = _launch_profile(request, run_cli)
    monkeypatch.setenv("FAKE_ANSIBLE_FAILS", "1")
    out = tmp_path / "out"
    assert c.run(_inputs(c, tmp_path), out).code == 2
    assert _listed(out) == {"failed/vars.yml", "failed/events.jsonl", "failed/ansible.log"}
    assert sorted(p.name for p in tmp_path.iterdir()) == ["inputs", "out"]  # the staging folder is gone


def test_matrix_refresh_write_replaces_only_the_regular_matrix_file(tmp_path, run_cli):
    from envkit.resources import matrices_dir

    matrices = tmp_path / "matrices"
    shutil.copytree(matrices_dir(), matrices)
    path = matrices / "python_packages.yaml"
    good = path.read_text()
    wrong = good.replace('when: {accelerate: ">=1.1.0,<1.11.0"}', 'when: {accelerate: ">=1.2.0,<1.12.0"}', 1)
    assert wrong != good
    real = tmp_path / "elsewhere.yaml"
    real.write_text(wrong)
    path.unlink()
    path.symlink_to(real)
    others = {p.name: p.read_bytes() for p in matrices.iterdir() if p.is_file() and not p.is_symlink()}
    r = run_cli("matrix", "refresh", "--snapshot", str(SNAPSHOT), "--matrix-dir", str(matrices), "--write")
    assert r.code == 2 and "refusing to write it" in r.err and "Traceback" not in r.err, r.err
    assert path.is_symlink() and real.read_text() == wrong
    path.unlink()
    path.write_text(wrong)
    r = run_cli("matrix", "refresh", "--snapshot", str(SNAPSHOT), "--matrix-dir", str(matrices), "--write")
    assert r.code == 0, r.err
    # the rule rewritten, sourced by the snapshot's day (the shipped one was read on 2026-11-30)
    rule = good.index('when: {accelerate: ">=1.1.0,<1.11.0"}')
    day = good.index("read 2026-11-30", rule)
    assert path.read_text() == good[:day] + "read 2026-12-04" + good[day + len("read 2026-11-30") :]
    assert not path.is_symlink()
    assert {p.name: p.read_bytes() for p in matrices.iterdir() if p.is_file() and p.name != path.name} == others
    assert sorted(p.name for p in matrices.iterdir() if p.is_file()) == sorted([*others, path.name])  # no temp file left


def test_provision_writes_each_hosts_reports_beside_the_output_then_records_them(tmp_path, run_cli, request, monkeypatch):
    """A run killed while it writes the reports (SIGKILL: no `finally`) must leave nothing in the output that its
    manifest does not list: the reports are written in the staging folder beside it, then moved in and listed."""
    import envkit.jobs.provision as provision
    from envkit.executor.ansible import RunResult

    verdict = {"smoke": "ok", "doctor": "ok", "reports": {"smoke.json": '{"ok": true}', "doctor.json": '{"ok": true}'}}

    def site(argv, env, *, on_event=None, events_log=None, stderr_log=None):
        Path(events_log).write_text("")
        Path(stderr_log).write_text("")
        events = [
            {"event": "result", "host": "h1", "task": "envkit_smoke : Smoke | Report verdict", "status": "ok", "msg": verdict},
            {"event": "stats", "hosts": {"h1": {"ok": 3, "changed": 0, "failed": 0, "unreachable": 0, "skipped": 0}}},
        ]
        return RunResult(returncode=0, events=events, stderr="")

    cmd = _provision(request, run_cli)
    monkeypatch.setattr("envkit.executor.ansible.run_playbook", site)
    seen: list[Path] = []
    real = provision.write_reports

    def spy(summary, report_dir):
        seen.append(report_dir)
        written = real(summary, report_dir)
        assert written and not any(p.is_relative_to(out) for p in written)  # nothing in the output yet
        return written

    monkeypatch.setattr(provision, "write_reports", spy)
    cmd.prepare(tmp_path / "in")
    out = tmp_path / "out"
    r = cmd.run(tmp_path / "in", out)
    assert r.code == 0, r.err
    assert len(seen) == 1 and not seen[0].is_relative_to(out)
    assert {"reports/h1/smoke.json", "reports/h1/doctor.json"} <= _listed(out)
    assert (out / "reports" / "h1" / "smoke.json").read_text() == '{"ok": true}\n'
    assert not seen[0].exists()  # the staging folder is gone
