"""tools/run_tests.py (`make test`): when the image tests get a session of their own, and how the two end."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.conftest import load_tool

PODMAN = {"DOCKER_HOST": "unix:///x.sock", "CONTAINERS_CONF": "/x.conf", "ENVKIT_TEST_BASE": "localhost/b"}


@pytest.fixture(scope="module")
def rt():
    return load_tool("run_tests")


@pytest.mark.parametrize(
    "args",
    [["tests/core"], ["tests/core/test_run_tests.py::test_x"], ["-m", "slow"], ["-mslow"], ["-k", "x"], ["-kx"]],
)
def test_arguments_that_select_tests_keep_one_session(rt, args):
    assert rt.selects(args) and rt.sides(["-ra", *args], PODMAN, root=True) == []


@pytest.mark.parametrize("args", [[], ["-ra", "--durations=20"], ["-q", "--maxfail=3", "-x"], ["--durations", "20"]])
def test_the_image_session_needs_the_podman_set_up_and_the_fleet_session_root(rt, args):
    assert not rt.selects(args)
    assert rt.sides(args, PODMAN, root=True) == [rt.IMAGE, rt.FLEET]
    assert rt.sides(args, PODMAN, root=False) == [rt.IMAGE]
    assert rt.sides(args, {}, root=True) == [rt.FLEET]
    assert rt.sides(args, {**PODMAN, "ENVKIT_SKIP_NSPAWN": "1"}, root=True) == [rt.IMAGE]
    assert rt.sides(args, {}, root=False) == []
    assert rt.sides(args, {**PODMAN, "ENVKIT_TEST_SPLIT": "0"}, root=True) == []
    for k in PODMAN:  # each of the three is needed
        assert rt.sides(args, {n: v for n, v in PODMAN.items() if n != k}, root=True) == [rt.FLEET]


FAKE_PYTEST = (
    "import os, sys\n"
    "name = 'IMAGE' if 'tests/image' in sys.argv else 'FLEET' if 'nspawn' in sys.argv else 'REST'\n"
    "print(name, os.environ.get('DOCKER_HOST'), ' '.join(sys.argv[1:]), flush=True)\n"
    "sys.exit(int(os.environ['RC_' + name]))\n"
)


def test_only_the_image_session_sees_the_podman_set_up_and_every_status_counts(rt, tmp_path, monkeypatch, capfd):
    """With a stand-in for pytest: the image session gets the Podman environment and `tests/image -m podman`, the
    fleet session `-m nspawn` without it, the rest neither's tests nor the set-up; the side sessions' output comes
    after the rest's; a failure in any fails."""
    fake = tmp_path / "fake_pytest.py"
    fake.write_text(FAKE_PYTEST)
    real = subprocess

    class Stand:  # `python -m pytest ARGS` becomes `python fake_pytest.py ARGS`
        STDOUT = real.STDOUT

        @staticmethod
        def Popen(cmd, **kw):  # noqa: N802
            return real.Popen([sys.executable, str(fake), *cmd[3:]], **kw)

        @staticmethod
        def call(cmd, **kw):
            return real.call([sys.executable, str(fake), *cmd[3:]], **kw)

    monkeypatch.setattr(rt, "subprocess", Stand)
    monkeypatch.setattr(rt.tempfile, "tempdir", str(tmp_path))  # the side sessions' folder: seen made, then gone
    monkeypatch.setattr(rt.os, "geteuid", lambda: 0)
    monkeypatch.delenv("ENVKIT_SKIP_NSPAWN", raising=False)
    monkeypatch.delenv("ENVKIT_TEST_SPLIT", raising=False)
    for k, v in PODMAN.items():
        monkeypatch.setenv(k, v)

    def run(rest: str, image: str, fleet: str) -> tuple[int, str]:
        monkeypatch.setenv("RC_REST", rest)
        monkeypatch.setenv("RC_IMAGE", image)
        monkeypatch.setenv("RC_FLEET", fleet)
        rc = rt.main(["-ra"])
        out = capfd.readouterr().out
        assert f"{tmp_path}/envkit-side-tests-" in out and not list(tmp_path.glob("envkit-side-tests-*"))
        return rc, out

    rc, out = run("0", "0", "0")
    assert rc == 0, out
    lines = out.splitlines()
    # no DOCKER_HOST: its clean-up cannot see the image session's images
    assert "REST None -m not podman and not nspawn -ra" in lines
    image = next(line for line in lines if line.startswith("IMAGE"))
    assert image.startswith("IMAGE unix:///x.sock tests/image -m podman -p no:cacheprovider --basetemp=")
    fleet = next(line for line in lines if line.startswith("FLEET"))
    assert fleet.startswith("FLEET None -m nspawn -p no:cacheprovider --basetemp=") and fleet.endswith(" -ra")
    assert image.split("--basetemp=")[1] != fleet.split("--basetemp=")[1]
    assert out.index("REST") < out.index("(Podman), the session beside") < out.index("IMAGE")
    assert out.index("IMAGE") < out.index("(systemd-nspawn), the session beside") < out.index("FLEET")
    for rcs in (("1", "0", "0"), ("0", "1", "0"), ("0", "0", "1"), ("0", "0", "2")):
        assert run(*rcs)[0] != 0, rcs
    assert run("0", "5", "5")[0] == 0  # no side test collected: not a failure
    assert run("5", "0", "0")[0] == 5  # but the rest collecting nothing is


def test_without_side_sessions_one_session_runs_as_before(rt, monkeypatch):
    calls = []
    monkeypatch.setattr(rt.subprocess, "call", lambda cmd, **kw: calls.append((cmd[3:], kw)) or 0)
    monkeypatch.setattr(rt.os, "geteuid", lambda: 1000)
    for k in PODMAN:
        monkeypatch.delenv(k, raising=False)
    assert rt.main(["-q"]) == 0
    assert calls == [(["-q"], {"cwd": rt.ROOT})]
