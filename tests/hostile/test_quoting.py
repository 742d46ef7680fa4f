"""Nothing is pasted raw: with the lock's grammar bypassed (values set with `model_copy`/`dataclasses.replace`,
no validation), every template still quotes for its language or refuses the value (exit 2).

The payloads would inject into a Dockerfile, POSIX sh, a requirements file or Jinja IF they were pasted; each
run here happens in a temp dir with a marker file that must never appear."""

from __future__ import annotations

import dataclasses
import hashlib
import re
import subprocess

import pytest

from envkit.errors import BadInput

PAYLOADS = [
    "$(touch {m})",
    "`touch {m}`",
    "'; touch {m}; '",
    '"; touch {m}; "',
    "${{PATH}}$HOME\\",
    "x && touch {m} #",
    "{{{{ 7*7 }}}}",
    "a\nRUN touch {m}",
    "a\r\nRUN touch {m}",
]
CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def _instructions(dockerfile: str) -> list[str]:
    """The instruction keywords of a Dockerfile, as Docker splits it: comments dropped, `\\` continues a line."""
    out, cont = [], False
    for line in dockerfile.splitlines():
        if not cont and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if not cont:
            out.append(line.split()[0])
        cont = line.endswith("\\")
    return out


@pytest.fixture(scope="module")
def plan(tmp_path_factory):
    from envkit.jobs.image import plan_lock
    from envkit.lock.file import read_lock
    from tests.image.conftest import GOLDEN_CASES, fake_requirements, fixture_installers, resolve_lock

    d = tmp_path_factory.mktemp("quoting")
    name = "a3-aarch64-cann8.5.0"
    lock = resolve_lock(GOLDEN_CASES[name], d / "envkit.lock")
    return plan_lock(
        read_lock(lock),
        generated_by="envkit image render",
        artifacts=fixture_installers(lock, d / "a"),
        requirements=fake_requirements(lock, d / "r.txt"),
    )


def _hostile_plan(plan, value: str, run_file: str, sha: str):
    s = plan.lock.stack.model_copy(update={"python": value, "chip": value})
    layout = plan.lock.layout.model_copy(update={"set_env": [value]})
    lock = plan.lock.model_copy(update={"stack": s, "layout": layout})
    steps = [
        dataclasses.replace(
            st,
            file=run_file,
            run=run_file,
            sha256=sha,
            zip_member=False,
            flags=(value, "--quiet"),
            component=value,
            version=value,
        )
        for st in plan.steps[:1]
    ]
    return dataclasses.replace(
        plan, lock=lock, steps=steps, env=[("X", value)], labels=[("io.envkit.x", value)], indexes=[value], wheels=[]
    )


@pytest.mark.parametrize("payload", PAYLOADS)
def test_dockerfile_quotes_or_refuses(plan, tmp_path, payload):
    from envkit.export.templates import dockerfile

    marker = tmp_path / "MARKER"
    value = payload.format(m=marker)
    installer = tmp_path / "inst.run"  # a stand-in installer that records its arguments, one per line
    installer.write_text(f'#!/bin/sh\nfor a in "$@"; do printf "%s\\n" "$a"; done > {tmp_path}/args\n')
    sha = hashlib.sha256(installer.read_bytes()).hexdigest()
    hostile = _hostile_plan(plan, value, "inst.run", sha)
    if CONTROL.search(value):  # no quoting can hold a newline in a Dockerfile line: refused
        with pytest.raises(BadInput, match="cannot be written into"):
            dockerfile(hostile)
        return
    text = dockerfile(hostile)
    clean = dockerfile(_hostile_plan(plan, "3.10", "inst.run", sha))
    assert _instructions(text) == _instructions(clean)
    assert f'X="{value.replace(chr(92), chr(92) * 2).replace(chr(34), chr(92) + chr(34)).replace("$", chr(92) + "$")}"' in text
    # the install step, run as the build runs it (bash, pipefail) in a temp dir: the payload arrives as one argument
    lines = text.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("RUN echo ") and "sha256sum -c" in line)
    body, i = [], start
    while True:
        body.append(lines[i].rstrip("\\"))
        if not lines[i].endswith("\\"):
            break
        i += 1
    script = "".join(body)[len("RUN ") :].replace(" && . ", " && true ")  # set_env: checked by quoting below
    r = subprocess.run(["bash", "-o", "pipefail", "-c", script], cwd=tmp_path, capture_output=True, text=True, timeout=30)
    assert r.returncode == 0, r.stderr
    assert (tmp_path / "args").read_text().splitlines() == [value, "--quiet"]
    assert not marker.exists()
    # every quoted word of the other RUN lines reads back as the payload in bash
    from envkit.export.templates import environment

    word = environment().filters["shq"](value)
    r = subprocess.run(["bash", "-c", f"printf %s {word}"], cwd=tmp_path, capture_output=True, text=True)
    assert r.stdout == value and not marker.exists()


@pytest.mark.parametrize("name", ["a/../../etc/passwd", "$HOME", "a b", "*.run", "x\nRUN id"])
def test_dockerfile_copy_paths_refused(plan, name):
    from envkit.export.templates import dockerfile

    with pytest.raises(BadInput, match="cannot be written into"):
        dockerfile(_hostile_plan(plan, "3.10", name, "0" * 64))


@pytest.mark.parametrize("payload", PAYLOADS)
def test_install_sh_quotes_or_refuses(tmp_path, payload):
    from envkit.export.templates import render

    marker = tmp_path / "MARKER"
    value = payload.format(m=marker)
    kw = {"envkit_version": value, "controller_python": value, "controller_arch": value}
    if CONTROL.search(value):
        with pytest.raises(BadInput, match="cannot be written into"):
            render("install.sh.j2", **kw)
        return
    script = tmp_path / "b" / "install.sh"
    script.parent.mkdir()
    script.write_text(render("install.sh.j2", **kw))
    assert subprocess.run(["sh", "-n", str(script)]).returncode == 0
    # run up to the version check: a stand-in python answers 3.10, the script names the payload and stops
    fake = tmp_path / "py"
    fake.write_text("#!/bin/sh\necho 3.10\n")
    fake.chmod(0o755)
    r = subprocess.run(
        ["sh", str(script), str(tmp_path / "venv")],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "PYTHON": str(fake)},
        timeout=30,
    )
    assert r.returncode == 2 and f"for Python {value}," in r.stderr, r.stderr
    assert not marker.exists()


@pytest.mark.parametrize("field", ["name", "version"])
@pytest.mark.parametrize(
    "payload", ["x --index-url https://evil", "1.0; python_version>'0'", "1.0\nevil==1", "file:///etc/passwd", "1.0 #"]
)
def test_requirement_lines_refuse_what_is_not_a_pin(field, payload):
    from envkit.artifacts.wheels import Requirement

    parts = {"name": "torch", "version": "2.1.0", "hashes": ("a" * 64,)} | {field: payload}
    with pytest.raises(BadInput, match="refused to write the pin"):
        Requirement(**parts).line()
    assert (
        Requirement("torch-npu", "2.1.0.post10+cpu", ("a" * 64,)).line()
        == f"torch-npu==2.1.0.post10+cpu --hash=sha256:{'a' * 64}"
    )


@pytest.mark.parametrize("command", ["envkit image render -o 'a\n!/etc/shadow'", "x\r\n**\n!*", "x\u0000y"])
def test_a_command_line_with_a_newline_stays_one_comment_in_every_context_file(plan, command):
    """`generated_by` (the command line, paths included) reaches a comment line of the Dockerfile and .dockerignore:
    a newline in it would start a new instruction or an ignore pattern (`!` re-includes files)."""
    from envkit.export.templates import context_files

    files = context_files(dataclasses.replace(plan, generated_by=command))
    for name in ("Dockerfile", ".dockerignore"):
        generated = [ln for ln in files[name].splitlines() if "GENERATED by" in ln]
        assert len(generated) == 1 and not any(c in generated[0] for c in "\n\r\x00"), (name, generated)
    assert files[".dockerignore"].splitlines()[1:] == ["**/*.tmp"]
