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
    assert rt.selects(args) and not rt.split(["-ra", *args], PODMAN)


@pytest.mark.parametrize("args", [[], ["-ra", "--durations=20"], ["-q", "--maxfail=3", "-x"], ["--durations", "20"]])
def test_the_whole_suite_is_split_only_with_the_podman_set_up(rt, args):
    assert not rt.selects(args)
    assert rt.split(args, PODMAN)
    assert not rt.split(args, {**PODMAN, "ENVKIT_TEST_SPLIT": "0"})
    for k in PODMAN:  # each of the three is needed
        assert not rt.split(args, {n: v for n, v in PODMAN.items() if n != k})


def test_the_rest_never_sees_the_podman_set_up_and_both_statuses_count(rt, tmp_path, monkeypatch, capfd):
    """With a stand-in for pytest: the image session gets the Podman environment and `tests/image -m podman`, the
    other gets neither; the image session's output comes after the other's; a failure in either fails."""
    fake = tmp_path / "fake_pytest.py"
    fake.write_text(
        "import os, sys\n"
        "image = 'tests/image' in sys.argv\n"
        "print('IMAGE' if image else 'REST', os.environ.get('DOCKER_HOST'), ' '.join(sys.argv[1:]), flush=True)\n"
        "sys.exit(int(os.environ['RC_IMAGE' if image else 'RC_REST']))\n"
    )
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
    monkeypatch.setattr(rt.tempfile, "tempdir", str(tmp_path))  # the image session's folder: seen made, then gone
    for k, v in PODMAN.items():
        monkeypatch.setenv(k, v)

    def run(rc_rest: str, rc_image: str) -> tuple[int, str]:
        monkeypatch.setenv("RC_REST", rc_rest)
        monkeypatch.setenv("RC_IMAGE", rc_image)
        rc = rt.main(["-ra"])
        out = capfd.readouterr().out
        assert f"{tmp_path}/envkit-image-tests-" in out and not list(tmp_path.glob("envkit-image-tests-*"))
        return rc, out

    rc, out = run("0", "0")
    assert rc == 0, out
    lines = out.splitlines()
    assert "REST None -m not podman -ra" in lines  # no DOCKER_HOST: its clean-up cannot see the image session's images
    image = next(line for line in lines if line.startswith("IMAGE"))
    assert image.startswith("IMAGE unix:///x.sock tests/image -m podman -p no:cacheprovider --basetemp=")
    assert out.index("REST") < out.index("the session beside the suite:") < out.index("IMAGE")
    assert run("1", "0")[0] == 1
    assert run("0", "1")[0] == 1
    assert run("0", "5")[0] == 0  # no image test collected (no root, no Podman): not a failure
