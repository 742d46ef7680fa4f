"""One nspawn fleet for the whole session, shared by every fleet test module (booting one takes minutes)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.provision.fleet import Fleet
from tests.provision.modules import ansible_module

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


def load_probe():
    """The envkit_probe module's code (its decisions, its checks) as a Python module, imported from the role once."""
    return ansible_module("envkit_probe")


def skip_under_mutation(why: str = "Ansible cannot run the mutated module files of a mutmut run") -> None:
    """Skips a test that cannot hold under mutmut (`make mutation`, which sets MUTANT_UNDER_TEST). By default one that
    runs envkit's modules through Ansible: Ansible would run the mutated copy of a module from its own temp folder,
    where the copy's trampoline cannot find mutmut's config. The unit tests call the modules' functions directly
    instead (tests/provision/modules.py), and the plain suite runs these."""
    import os

    if "MUTANT_UNDER_TEST" in os.environ:
        pytest.skip(why)


def local_ansible_playbook() -> Path:
    """ansible-playbook beside this interpreter, for a play on this machine (skipped without one, or under mutmut)."""
    skip_under_mutation()
    ap = Path(sys.executable).parent / "ansible-playbook"
    if not ap.exists():
        pytest.skip("ansible-playbook not installed beside this interpreter")
    return ap


def run_local_playbook(
    ansible_playbook: Path | str, play: Path, *extra: str, env: dict[str, str], timeout: int, tmp_dir: Path | None = None
) -> subprocess.CompletedProcess:
    """`ansible-playbook` of `play` on localhost (local connection, this interpreter), `extra` before the play.

    Its temp folder (TMPDIR) is one of its own, removed after, or `tmp_dir` (kept, for the caller to look into): no
    test may leave anything in /tmp, such as a module's `ansible_<module>_payload_*` folder."""
    import contextlib
    import tempfile

    skip_under_mutation()

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
