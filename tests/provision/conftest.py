"""One nspawn fleet for the whole session, shared by every fleet test module (booting one takes minutes)."""

from __future__ import annotations

import functools
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.provision.fleet import Fleet

PLAYBOOKS = Path(__file__).resolve().parents[2] / "playbooks"
PROBE = PLAYBOOKS / "plugins" / "modules" / "envkit_probe.py"

FLEET_SIZE = 3


@pytest.fixture(scope="session")
def fleet(tmp_path_factory):
    f = Fleet(tmp_path_factory.mktemp("prov-fleet") / "fleet", FLEET_SIZE)
    try:
        f.up()
        yield f
    finally:
        f.down()


@functools.cache
def load_probe():
    """The envkit_probe module's code (its decisions, its checks) as a Python module, imported from the role once."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("envkit_probe_under_test", PROBE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def run_local_playbook(
    ansible_playbook: Path | str, play: Path, *extra: str, env: dict[str, str], timeout: int, tmp_dir: Path | None = None
) -> subprocess.CompletedProcess:
    """`ansible-playbook` of `play` on localhost (local connection, this interpreter), `extra` before the play.

    Its temp folder (TMPDIR) is one of its own, removed after, or `tmp_dir` (kept, for the caller to look into): no
    test may leave anything in /tmp, such as a module's `ansible_<module>_payload_*` folder."""
    import contextlib
    import tempfile

    own = tempfile.TemporaryDirectory(prefix="envkit-ansible-tmp-") if tmp_dir is None else contextlib.nullcontext(str(tmp_dir))
    with own as tmp:
        return subprocess.run(
            [
                str(ansible_playbook),
                "-i",
                "localhost,",
                "-c",
                "local",
                "-e",
                f"ansible_python_interpreter={sys.executable}",
                *extra,
                str(play),
            ],
            env={**env, "TMPDIR": tmp},
            capture_output=True,
            text=True,
            timeout=timeout,
        )


def write_play(path: Path, tasks: list[dict], **play: object) -> Path:
    """A playbook of one play on every host of the inventory, without fact gathering: `tasks`, and `play`'s keys."""
    path.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, **play, "tasks": tasks}]))
    return path


def run_probe(
    ansible_playbook: Path | str, tmp_path: Path, probe_args: dict, timeout: int, *extra: str
) -> subprocess.CompletedProcess:
    """The real envkit_probe module with `probe_args` through Ansible on localhost, `extra` arguments before the play;
    its result in tmp_path/result.json."""
    from envkit.executor.ansible import playbook_env

    play = tmp_path / "probe.yml"
    write_play(
        play,
        [
            {"envkit_probe": probe_args, "register": "r"},
            {
                "ansible.builtin.copy": {
                    "content": "{{ r | to_json }}",
                    "dest": str(tmp_path / "result.json"),
                    "mode": "0600",
                }
            },
        ],
    )
    env = {**playbook_env(PLAYBOOKS), "ANSIBLE_LIBRARY": str(PROBE.parent), "ANSIBLE_STDOUT_CALLBACK": "default"}
    return run_local_playbook(ansible_playbook, play, *extra, env=env, timeout=timeout)
