"""The image holds envkit (#38): `envkit image render` puts envkit's own wheel into the build context and the Dockerfile
installs it offline, pinned by its sha256; the smoke Jobs run `envkit smoke` in that image. No engine needed."""

from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import sys
import sysconfig
import venv
import zipfile
from pathlib import Path

import pytest

from envkit import __version__

from .conftest import render_args

CASE = "910b-x86_64-cpu-torch"  # its stand-in requirements hold envkit's dependencies (tools/stand_in_requirements.py)
WHEEL = f"envkit-{__version__}-py3-none-any.whl"


def _render(capsys, lock: Path, arts: Path, reqs: Path, out: Path) -> dict:
    from envkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main([*render_args(lock, arts, reqs, out), "--json"])
    assert exc.value.code in (0, None)
    return json.loads(capsys.readouterr().out)


def _tree(folder: Path) -> dict[str, bytes]:
    return {p.relative_to(folder).as_posix(): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_the_context_holds_envkits_wheel_pinned_by_its_sha256(golden_inputs, tmp_path: Path, capsys) -> None:
    lock, arts, reqs = golden_inputs[CASE]
    ctx = tmp_path / "ctx"
    report = _render(capsys, lock, arts, reqs, ctx)
    wheel = ctx / "python" / "envkit" / "wheels" / WHEEL
    assert wheel.is_file()
    sha = hashlib.sha256(wheel.read_bytes()).hexdigest()
    assert report["envkit"] == {"wheel": WHEEL, "version": __version__, "sha256": sha}
    assert not any("no envkit" in n for n in report["notes"]), report["notes"]
    # its own requirements file pins it by that sha256; no other layer names envkit
    ek_reqs = (ctx / "python" / "envkit" / "requirements.txt").read_text()
    assert [x for x in ek_reqs.splitlines() if not x.startswith("#")] == [f"envkit=={__version__} --hash=sha256:{sha}"]
    for part in ("torch", "rest"):
        assert "envkit==" not in (ctx / "python" / part / "requirements.txt").read_text()
    # the Dockerfile installs it last, offline from the context, after checking the requirements file's sha256
    text = (ctx / "Dockerfile").read_text()
    ek_run = text[text.index("RUN --mount=type=bind,source=python/envkit,") :]
    ek_run = ek_run[: ek_run.index("\n\n")]
    req_sha = hashlib.sha256(ek_reqs.encode()).hexdigest()
    assert f"echo '{req_sha}  /tmp/envkit-python/envkit/requirements.txt' | sha256sum -c -" in ek_run
    assert "--no-index --find-links /tmp/envkit-python/envkit/wheels" in ek_run
    assert "--no-deps --require-hashes --only-binary=:all:" in ek_run and "--index-url" not in ek_run
    assert ek_run.rstrip().endswith("pip check --disable-pip-version-check")
    assert text.index("source=python/rest,") < text.index("source=python/envkit,") < text.index("\nENV ")
    # what the CLI prints names it too
    from envkit.cli import main

    with pytest.raises(SystemExit):
        main(render_args(lock, arts, reqs, ctx))
    assert f"envkit  {WHEEL} (sha256 {sha[:12]}" in capsys.readouterr().out


def test_the_context_is_byte_identical_across_renders(golden_inputs, tmp_path: Path, capsys) -> None:
    """Rendered again in place, and afresh: the same bytes, file for file (envkit's wheel included)."""
    import shutil

    lock, arts, reqs = golden_inputs[CASE]
    ctx = tmp_path / "ctx"
    _render(capsys, lock, arts, reqs, ctx)
    first = _tree(ctx)
    assert f"python/envkit/wheels/{WHEEL}" in first
    _render(capsys, lock, arts, reqs, ctx)
    assert _tree(ctx) == first
    shutil.rmtree(ctx)
    _render(capsys, lock, arts, reqs, ctx)
    assert _tree(ctx) == first


def test_the_wheel_is_envkit_with_its_entry_point(golden_inputs, tmp_path: Path, capsys) -> None:
    lock, arts, reqs = golden_inputs[CASE]
    _render(capsys, lock, arts, reqs, tmp_path / "ctx")
    with zipfile.ZipFile(tmp_path / "ctx" / "python" / "envkit" / "wheels" / WHEEL) as zf:
        names = set(zf.namelist())
        assert {"envkit/__init__.py", "envkit/__main__.py", "envkit/cli/__init__.py"} <= names
        assert "envkit/_data/images/Dockerfile.j2" in names  # its data folders, as an installed envkit has them
        entry = zf.read(f"envkit-{__version__}.dist-info/entry_points.txt").decode()
        assert re.search(r"^envkit\s*=\s*envkit\.cli:main$", entry, re.M), entry
        assert zf.testzip() is None


def test_the_contexts_wheel_installs_offline_and_runs(golden_inputs, tmp_path: Path, capsys) -> None:
    """As the Dockerfile does: `pip install --no-index --no-deps --require-hashes` from python/envkit/ into a fresh
    venv; then its `envkit --version` runs the installed wheel."""
    lock, arts, reqs = golden_inputs[CASE]
    ctx = tmp_path / "ctx"
    _render(capsys, lock, arts, reqs, ctx)
    env_dir = tmp_path / "venv"
    venv.EnvBuilder(with_pip=False).create(env_dir)
    py = env_dir / "bin" / "python"
    site = Path(subprocess.run([py, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                               capture_output=True, text=True, check=True).stdout.strip())  # fmt: skip
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_CONFIG_FILE")} | {"PIP_NO_INPUT": "1"}
    r = subprocess.run(
        [sys.executable, "-m", "pip", "--isolated", "--python", str(py), "install", "-q", "--no-cache-dir",
         "--disable-pip-version-check", "--no-deps", "--require-hashes", "--only-binary=:all:", "--no-index",
         "--find-links", str(ctx / "python" / "envkit" / "wheels"), "-r", str(ctx / "python" / "envkit" / "requirements.txt")],
        capture_output=True, text=True, env=env, timeout=300,
    )  # fmt: skip
    assert r.returncode == 0, r.stdout + r.stderr
    assert (site / f"envkit-{__version__}.dist-info").is_dir()
    # the dependencies: this environment's, a path entry after the venv's own site-packages (added after the install,
    # or pip would take this environment's envkit for an installed one)
    (site / "zz_deps.pth").write_text(sysconfig.get_paths()["purelib"] + "\n")
    run = {"capture_output": True, "text": True, "env": env, "cwd": tmp_path, "timeout": 120}  # not this checkout's cwd
    r = subprocess.run([env_dir / "bin" / "envkit", "--version"], **run)
    assert r.returncode == 0 and __version__ in r.stdout, r.stdout + r.stderr
    r = subprocess.run([py, "-c", "import envkit; print(envkit.__file__)"], **run)
    assert Path(r.stdout.strip()).is_relative_to(site), r.stdout  # the installed wheel, not this checkout


def _requirements_without(reqs: Path, out: Path, *names: str) -> Path:
    blocks = reqs.read_text().replace("\\\n", "").splitlines()
    out.write_text("\n".join(x for x in blocks if x.split("==")[0].strip() not in names) + "\n")
    return out


def test_pins_without_envkits_dependencies_give_an_image_without_envkit_and_say_so(golden_inputs, tmp_path: Path, capsys) -> None:
    lock, arts, reqs = golden_inputs[CASE]
    ctx = tmp_path / "ctx"
    report = _render(capsys, lock, arts, _requirements_without(reqs, tmp_path / "r.txt", "pydantic", "typer"), ctx)
    assert report["envkit"] is None
    note = next(n for n in report["notes"] if n.startswith("the image holds no envkit"))
    assert "pydantic<3,>=2.6" in note and "typer>=0.12" in note and "envkit lock" in note and "smoke" in note
    assert not (ctx / "python" / "envkit").exists() and "python/envkit" not in (ctx / "Dockerfile").read_text()


def test_an_envkit_among_the_pins_gives_way_to_the_own_wheel(golden_inputs, tmp_path: Path, capsys) -> None:
    lock, arts, reqs = golden_inputs[CASE]
    other = hashlib.sha256(b"another envkit").hexdigest()
    with_envkit = tmp_path / "r.txt"
    with_envkit.write_text(reqs.read_text() + f"envkit==0.0.1 --hash=sha256:{other}\n")
    ctx = tmp_path / "ctx"
    report = _render(capsys, lock, arts, with_envkit, ctx)
    assert report["envkit"]["wheel"] == WHEEL
    assert any("envkit==0.0.1 of the Python pins is not installed" in n for n in report["notes"]), report["notes"]
    assert "envkit==" not in (ctx / "python" / "rest" / "requirements.txt").read_text()


def test_a_python_envkit_does_not_install_on_leaves_it_out(golden_inputs) -> None:
    from envkit.export.image import plan_envkit
    from envkit.lock.file import read_lock

    lock = read_lock(golden_inputs[CASE][0])
    old = lock.model_copy(update={"stack": lock.stack.model_copy(update={"python": "3.9"})})
    own, why = plan_envkit(old, [])
    assert own is None and why.startswith("envkit needs Python >=3.10, the image's is 3.9")
