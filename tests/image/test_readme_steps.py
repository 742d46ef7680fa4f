"""The README's Container images steps, as a new user runs them: its commands are read from README.md and run in an
empty folder with the vendor packages in `vendor/` (fixture installers: no real CANN here).

Rendering a lock straight from `envkit resolve` is refused, naming the `envkit lock` step the README shows before it;
after that step the README's render line works as written. This machine cannot reach download.pytorch.org, so the
`envkit lock` step gets stand-ins of PyPI and the PyTorch CPU index on 127.0.0.1 (tests/airgap/torchindex.py): its
line as the README writes it, plus `--index-url` and `--torch-index-url`.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

from tests.image.conftest import ROOT, fixture_installers


def readme_commands(heading: str) -> list[list[str]]:
    """The command lines of the first ```sh block under the README's `## heading`: comments and options in [brackets]
    (optional, as the README marks them) left out."""
    section = (ROOT / "README.md").read_text().split(f"\n## {heading}\n", 1)[1]
    block = section.split("```sh\n", 1)[1].split("\n```", 1)[0]
    out = []
    for raw in block.splitlines():
        line = re.sub(r"\s*\[[^\]]*\]", "", raw.split("#", 1)[0]).strip()
        if line:
            out.append(shlex.split(line))
    return out


def _envkit(argv: list[str], cwd: Path) -> subprocess.CompletedProcess:
    assert argv[0] == "envkit", argv
    return subprocess.run(
        [sys.executable, "-m", "envkit", *argv[1:]], capture_output=True, text=True, cwd=cwd, env=dict(os.environ), timeout=600
    )


def test_the_readme_image_steps_work_as_written(tmp_path, monkeypatch):
    from tests.airgap.httpserve import Server
    from tests.airgap.torchindex import default_stack

    work = tmp_path / "work"
    work.mkdir()
    _, _, pypi_dir, cpu_dir = default_stack(tmp_path, monkeypatch)  # the default target's stand-in indexes (needs uv)
    steps = {tuple(c[:3]) if c[1] == "image" else tuple(c[:2]): c for c in readme_commands("Container images")}
    resolve, lock, render = steps["envkit", "resolve"], steps["envkit", "lock"], steps["envkit", "image", "render"]
    assert list(steps) == [
        ("envkit", "resolve"),
        ("envkit", "lock"),
        *[("envkit", "image", x) for x in ("render", "build", "run-args")],
    ]

    r = _envkit(resolve, work)
    assert r.returncode == 0, r.stderr
    fixture_installers(work / "envkit.lock", work / "vendor")

    r = _envkit(render, work)  # before `envkit lock`: refused, with the step to take
    assert r.returncode == 2, r.stdout + r.stderr
    assert "no hashed Python pins" in r.stderr and "  next: Run `envkit lock --lock envkit.lock`" in r.stderr
    assert not (work / "image").exists()

    with Server(pypi_dir, simple_index=True) as pypi, Server(cpu_dir, simple_index=True) as cpu:
        r = _envkit([*lock, "--index-url", f"{pypi.url}/simple", "--torch-index-url", f"{cpu.url}/simple"], work)
    assert r.returncode == 0, r.stdout + r.stderr

    r = _envkit(render, work)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "hashed pins from the lock's closure" in r.stdout
    dockerfile = (work / "image" / "Dockerfile").read_text()
    assert (
        "--require-hashes" in dockerfile
        and "torch==2.12.0+cpu" in (work / "image" / "python" / "torch" / "requirements.txt").read_text()
    )

    r = _envkit(steps["envkit", "image", "run-args"], work)
    assert r.returncode == 0 and "/dev/davinci0" in r.stdout, r.stdout + r.stderr


def test_render_names_every_vendor_package_it_lacks_and_where_to_get_it(tmp_path, run_cli):
    """An empty vendor folder: one error listing each CANN package of the lock (not only the first), with the vendor's
    URL of each signed .zip the lock records."""
    from envkit.lock.file import read_lock

    lock = tmp_path / "envkit.lock"
    r = run_cli("-q", "resolve", "-o", str(lock))
    assert r.code == 0, r.err
    (tmp_path / "vendor").mkdir()
    reqs = tmp_path / "requirements.txt"
    subprocess.run([sys.executable, str(ROOT / "tools" / "stand_in_requirements.py"), str(lock), str(reqs)], check=True)
    r = run_cli("image", "render", "--lock", str(lock), "--artifacts", str(tmp_path / "vendor"), "--requirements", str(reqs))
    assert r.code == 2, r.out + r.err
    cann = [a for a in read_lock(lock).artifacts if a.component.startswith("cann-")]
    assert f"error: {len(cann)} vendor package(s) of the lock are not in {tmp_path / 'vendor'}: " in r.err
    for art in cann:
        assert f"{art.component} {art.version}: " in r.err and (art.run.file or art.run.pattern) in r.err
        if art.zip:
            assert f"{art.zip.file}: {art.zip.url}" in r.err
