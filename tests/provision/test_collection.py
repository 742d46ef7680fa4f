"""The roles as an Ansible collection (playbooks/galaxy.yml): built with ansible-galaxy, installed without a Galaxy
server, and used by its fully qualified names from a playbook that cannot see playbooks/roles; each role's README is
what tools/role_docs.py writes from its specs, and its Galaxy platforms are the matrix's operating systems."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tarfile
from pathlib import Path

import pytest
import yaml

import envkit
from envkit.core.matrix import load_matrix

ROOT = Path(__file__).resolve().parents[2]
PLAYBOOKS = ROOT / "playbooks"
ROLES = sorted(p.name for p in (PLAYBOOKS / "roles").iterdir() if (p / "meta" / "main.yml").is_file())
MODULES = ("envkit_fetch", "envkit_probe")
BIN = Path(sys.executable).parent

# matrices/platform.yaml operating system -> Galaxy's (name, version); None: Galaxy has no name for it
GALAXY = {
    "ubuntu20.04": ("Ubuntu", "focal"),
    "ubuntu22.04": ("Ubuntu", "jammy"),
    "ubuntu24.04": ("Ubuntu", "noble"),
    "debian10": ("Debian", "buster"),
    "debian11": ("Debian", "bullseye"),
    "debian12": ("Debian", "bookworm"),
    "centos7.6": ("EL", "7"),
    "centos8.2": ("EL", "8"),
    "openeuler22.03": None,
    "openeuler24.03": None,
    "kylinv10": None,
}


def _tool(name: str) -> str:
    path = BIN / name
    if not path.exists():
        pytest.skip(f"{name} is not installed beside this Python")
    return str(path)


def _env(tmp_path: Path) -> dict[str, str]:
    """No envkit config: the collection alone, from tmp_path/collections (playbooks/roles out of reach)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update(
        {
            "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "collections"),
            "ANSIBLE_ROLES_PATH": str(tmp_path / "no-roles"),
            "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
            "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
            "ANSIBLE_NOCOLOR": "1",
            "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",
        }
    )
    return env


def test_the_galaxy_platforms_are_the_matrix_operating_systems():
    oses = [o.id for o in load_matrix().model.operating_systems]
    unknown = [o for o in oses if o not in GALAXY]
    assert not unknown, f"add the Galaxy name of {unknown} to GALAXY (or None), then to the roles' meta/main.yml"
    want: dict[str, list[str]] = {}
    for os_id in oses:
        if GALAXY[os_id] is not None:
            name, version = GALAXY[os_id]
            want.setdefault(name, []).append(version)
    for role in ROLES:
        meta = yaml.safe_load((PLAYBOOKS / "roles" / role / "meta" / "main.yml").read_text())
        have = {p["name"]: [str(v) for v in p["versions"]] for p in meta["galaxy_info"]["platforms"]}
        assert {k: sorted(v) for k, v in have.items()} == {k: sorted(v) for k, v in want.items()}, role
    # Debian 12 is no matrix OS (`resolve --os debian12` is refused), so no role may claim bookworm
    assert "debian12" not in oses


def test_each_role_readme_is_written_from_its_specs(tmp_path):
    sys.path.insert(0, str(ROOT / "tools"))
    try:
        import role_docs
    finally:
        sys.path.remove(str(ROOT / "tools"))
    check = subprocess.run([sys.executable, str(ROOT / "tools" / "role_docs.py"), "--check"], capture_output=True, text=True)
    assert check.returncode == 0, check.stdout + check.stderr
    for role in ROLES:
        text = (PLAYBOOKS / "roles" / role / "README.md").read_text()
        specs = yaml.safe_load((PLAYBOOKS / "roles" / role / "meta" / "argument_specs.yml").read_text())
        for name in specs["argument_specs"]["main"]["options"]:
            assert f"| `{name}` |" in text, (role, name)
        assert f"role: envkit.ascend.{role}" in text
    # a spec edited and its README not rewritten: stale
    copy = tmp_path / "envkit_smoke"
    shutil.copytree(PLAYBOOKS / "roles" / "envkit_smoke", copy)
    spec = copy / "meta" / "argument_specs.yml"
    spec.write_text(spec.read_text().replace("description: dtype", "description: the dtype | of <the> run"))
    rendered = role_docs.render(copy)
    assert rendered != (copy / "README.md").read_text()
    assert "| `envkit_smoke_dtype` | str | `bf16` | the dtype \\| of &lt;the> run |" in rendered


def test_the_collection_version_is_envkits():
    galaxy = yaml.safe_load((PLAYBOOKS / "galaxy.yml").read_text())
    assert galaxy["version"] == envkit.__version__
    assert f"envkit-ascend-{envkit.__version__}.tar.gz" in (PLAYBOOKS / "README.md").read_text()


def _build(tmp_path: Path, env: dict[str, str]) -> Path:
    """`ansible-galaxy collection build playbooks/`: the tarball, in tmp_path/dist."""
    out = tmp_path / "dist"
    build = subprocess.run(
        [_tool("ansible-galaxy"), "collection", "build", str(PLAYBOOKS), "--output-path", str(out)],
        capture_output=True,
        text=True,
        env=env,
    )
    assert build.returncode == 0, build.stdout + build.stderr
    (tarball,) = out.glob("envkit-ascend-*.tar.gz")
    return tarball


def _install(tmp_path: Path, env: dict[str, str], tarball: Path) -> Path:
    """The tarball installed without a Galaxy server into tmp_path/collections: the collection's folder."""
    install = subprocess.run(
        [_tool("ansible-galaxy"), "collection", "install", str(tarball), "-p", str(tmp_path / "collections")],
        capture_output=True,
        text=True,
        env=env,
    )
    assert install.returncode == 0, install.stdout + install.stderr
    return tmp_path / "collections" / "ansible_collections" / "envkit" / "ascend"


def test_each_module_has_one_source_file_the_roles_find_from_this_folder():
    """plugins/modules holds the modules themselves (no link, no copy in a role's library/): the installed collection
    lists them, and `envkit provision`, which plays the roles from this folder, finds them by ansible.cfg's
    `library` (relative to ansible.cfg), by the same short names a role of the installed collection uses."""
    import configparser

    for module in MODULES:
        path = PLAYBOOKS / "plugins" / "modules" / f"{module}.py"
        assert path.is_file() and not path.is_symlink(), path
    assert sorted(p.name for p in (PLAYBOOKS / "plugins" / "modules").iterdir()) == [f"{m}.py" for m in MODULES]
    # no link at all: the wheel and the bundle copy this tree too (.ansible: ansible-lint's cache, never shipped)
    assert not [p for p in PLAYBOOKS.rglob("*") if p.is_symlink() and p.relative_to(PLAYBOOKS).parts[0] != ".ansible"]
    assert not list(PLAYBOOKS.glob("roles/*/library"))
    cfg = configparser.ConfigParser()
    cfg.read(PLAYBOOKS / "ansible.cfg")
    assert [(PLAYBOOKS / p).resolve() for p in cfg["defaults"]["library"].split(os.pathsep)] == [
        (PLAYBOOKS / "plugins" / "modules").resolve()
    ]
    tasks = PLAYBOOKS / "roles" / "envkit_preflight" / "tasks"
    assert "\n  envkit_probe:\n" in (tasks / "probe.yml").read_text()
    assert "\n  envkit_fetch:\n" in (tasks / "fetch.yml").read_text()


def test_the_collection_builds_installs_and_its_roles_resolve_by_their_full_names(tmp_path):
    galaxy = _tool("ansible-galaxy")
    env = _env(tmp_path)
    tarball = _build(tmp_path, env)
    with tarfile.open(tarball) as tar:
        members = {m.name: m for m in tar.getmembers()}
        manifest = json.load(tar.extractfile("MANIFEST.json"))  # type: ignore[arg-type]
    names = set(members)
    assert manifest["collection_info"]["namespace"] == "envkit" and manifest["collection_info"]["name"] == "ascend"
    for role in ROLES:
        assert f"roles/{role}/meta/argument_specs.yml" in names and f"roles/{role}/README.md" in names
    assert "meta/runtime.yml" in names
    for module in MODULES:  # the collection's modules, plain files (ansible-doc -l skips a link as an alias)
        assert members[f"plugins/modules/{module}.py"].isfile(), module
    assert not [n for n, m in members.items() if m.issym() or m.islnk() or "/library/" in f"/{n}"]
    # the lint configuration the roles are written to travels with them (the production profile passes with it)
    assert {".ansible-lint", ".yamllint"} <= names
    # what only envkit provision uses stays out: its playbooks, config, callback and inventory
    assert not {n for n in names if n.split("/")[0] in ("site.yml", "ansible.cfg", "inventory", "callback_plugins")}

    _install(tmp_path, env, tarball)
    listed = subprocess.run([galaxy, "collection", "list", "envkit.ascend"], capture_output=True, text=True, env=env)
    assert "envkit.ascend" in listed.stdout and envkit.__version__ in listed.stdout, listed.stdout + listed.stderr
    # both modules are listed (issue 38: as links they were skipped as aliases) and their documentation renders
    listed = subprocess.run([_tool("ansible-doc"), "-l", "envkit.ascend"], capture_output=True, text=True, env=env)
    assert listed.returncode == 0, listed.stdout + listed.stderr
    assert sorted(line.split()[0] for line in listed.stdout.splitlines() if line.strip()) == [
        f"envkit.ascend.{m}" for m in MODULES
    ], listed.stdout + listed.stderr
    doc = subprocess.run([_tool("ansible-doc"), "envkit.ascend.envkit_probe"], capture_output=True, text=True, env=env)
    assert doc.returncode == 0 and "envkit_probe" in doc.stdout and "expect" in doc.stdout, doc.stdout + doc.stderr

    # every role and its dependency on envkit_preflight (a short name inside the collection) resolve from the
    # installed collection alone
    play = tmp_path / "play.yml"
    play.write_text(
        yaml.safe_dump(
            [
                {
                    "name": "Use the collection",
                    "hosts": "all",
                    "gather_facts": False,
                    "roles": [f"envkit.ascend.{r}" for r in ROLES],
                }
            ]
        )
    )
    syntax = subprocess.run(
        [_tool("ansible-playbook"), "--syntax-check", "-i", "localhost,", str(play)], capture_output=True, text=True, env=env
    )
    assert syntax.returncode == 0, syntax.stdout + syntax.stderr
    # a role the collection lacks is an error, so the check above is not vacuous
    play.write_text(yaml.safe_dump([{"hosts": "all", "gather_facts": False, "roles": ["envkit.ascend.envkit_nope"]}]))
    missing = subprocess.run(
        [_tool("ansible-playbook"), "--syntax-check", "-i", "localhost,", str(play)], capture_output=True, text=True, env=env
    )
    assert missing.returncode != 0 and "envkit_nope" in missing.stdout + missing.stderr

    # the packaged probe module runs: envkit_preflight from the collection, on this machine, in check mode
    import platform

    play.write_text(
        yaml.safe_dump(
            [
                {
                    "hosts": "all",
                    "gather_facts": False,
                    "roles": ["envkit.ascend.envkit_preflight"],
                    "vars": {
                        "envkit_preflight_lock_arch": platform.machine(),
                        "envkit_preflight_lock_os_family": "debian" if Path("/etc/debian_version").exists() else "rhel",
                        "envkit_preflight_require_kernel_headers": False,
                        "envkit_preflight_manage_user": False,
                        "envkit_preflight_min_free_gb": 0,
                        "envkit_preflight_install_path": str(tmp_path / "Ascend"),
                    },
                }
            ]
        )
    )
    (tmp_path / "Ascend").mkdir()
    run = subprocess.run(
        [_tool("ansible-playbook"), "--check", "-c", "local", "-i", "localhost,", str(play)],
        capture_output=True,
        text=True,
        env={**env, "ANSIBLE_PYTHON_INTERPRETER": sys.executable},
        timeout=300,
    )
    assert run.returncode == 0, run.stdout + run.stderr
    assert "Preflight | Probe the host" in run.stdout and "failed=0" in run.stdout

    doc = subprocess.run(
        [_tool("ansible-doc"), "-t", "role", "envkit.ascend.envkit_smoke"], capture_output=True, text=True, env=env
    )
    assert doc.returncode == 0 and "envkit_smoke_dtype" in doc.stdout, doc.stdout + doc.stderr
    # the modules' own documentation parses (a `word: ` inside a plain YAML scalar breaks it for ansible-doc)
    for module, word in (("envkit_probe", "envkit_state.decide.end"), ("envkit_fetch", "MIRROR: PATH: why")):
        doc = subprocess.run(
            [_tool("ansible-doc"), "-t", "module", f"envkit.ascend.{module}"], capture_output=True, text=True, env=env
        )
        assert doc.returncode == 0 and word in doc.stdout, doc.stdout + doc.stderr


def test_the_installed_collection_passes_ansible_lints_production_profile(tmp_path):
    """ansible-lint on the installed collection, as Galaxy or a user would run it there: offline, the production
    profile, with the .ansible-lint and .yamllint it ships (issue 38: without .yamllint, 7 lines over the default
    160 characters), no warning either (issue 38: one jinja[spacing])."""
    lint = _tool("ansible-lint")
    env = _env(tmp_path)
    collection = _install(tmp_path, env, _build(tmp_path, env))
    (tmp_path / "tmp").mkdir()
    p = subprocess.run(
        [lint, "--offline", "--profile", "production", "--nocolor"],
        cwd=collection,
        capture_output=True,
        text=True,
        env={**env, "TMPDIR": str(tmp_path / "tmp"), "XDG_CACHE_HOME": str(tmp_path / "cache"), "NO_COLOR": "1"},
        timeout=600,
    )
    out = p.stdout + p.stderr
    assert p.returncode == 0, out
    assert "0 failure(s), 0 warning(s)" in out and "Profile 'production' was required, and it passed" in out, out


def test_envkit_provision_finds_its_modules_whatever_the_users_ansible_library(tmp_path):
    """ANSIBLE_LIBRARY overrides ansible.cfg's `library`: the environment envkit plays with sets it to the collection's
    modules, so a user's own setting cannot hide envkit_probe and envkit_fetch (the roles call them by short name)."""
    from envkit.executor.ansible import playbook_env

    env = playbook_env(ROOT / "playbooks", {"ANSIBLE_LIBRARY": str(tmp_path), "PATH": "/usr/bin"})
    modules = Path(env["ANSIBLE_LIBRARY"])
    assert modules == ROOT / "playbooks" / "plugins" / "modules"
    assert sorted(p.name for p in modules.glob("envkit_*.py")) == ["envkit_fetch.py", "envkit_probe.py"]
