"""The layers: jobs stand on the lock alone, never on the matrix or the resolver; each job stands in its own room.

matrix -> constraints -> resolve -> locking (derive a lock) -> envkit.lock -> lockfile (read, write) -> jobs.
The shared layers under the jobs: `fleet` (multi-host knowledge), `export` (every text rendered from a lock),
`executor` (Ansible, Docker, processes), and the small modules beside them. A job (image, airgap, provision,
launch, smoke, doctor) imports shared layers, never another job; a shared layer imports no job; no module
imports itself back through others (no circle). The checks are static (every import statement, lazy ones inside
functions too) and, for the resolver side, dynamic (what importing the module really loads).
"""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "envkit"

# The floors, bottom up: a module's floor is its folder under envkit/ (a job's, its folder under envkit/jobs/; the root's
# modules are the vocabulary), and each floor may import the floors named here, lazy and TYPE_CHECKING imports
# included. A new folder gets a line; a job that is not listed is refused by test_every_module_has_a_floor.
_BASE = frozenset({"vocabulary", "io", "models", "lock"})
_SHARED = _BASE | {"artifacts", "fleet", "export", "executor"}
MAY_IMPORT: dict[str, frozenset[str]] = {
    "vocabulary": frozenset({"vocabulary"}),
    "io": frozenset({"vocabulary", "io"}),
    "models": frozenset({"vocabulary", "io", "models"}),
    "schemas": frozenset({"vocabulary", "io", "models", "schemas"}),
    "lock": _BASE,
    "core": _BASE | {"core"},  # the resolver side: matrix, constraints, resolve, derive, validation
    "artifacts": _BASE | {"artifacts"},
    "fleet": _BASE | {"fleet"},
    "export": _BASE | {"artifacts", "fleet", "export"},
    "executor": _BASE | {"fleet", "executor"},
    "jobs.bundle": _SHARED | {"jobs.bundle"},
    "jobs.provision": _SHARED | {"jobs.provision"},
    "jobs.launch": _SHARED | {"jobs.launch"},
    "jobs.k8s": _SHARED | {"jobs.k8s"},
    "jobs.smoke": _SHARED | {"jobs.smoke"},
    "jobs.scan": _SHARED | {"jobs.scan"},
    "jobs.image": _SHARED | {"jobs.image"},
    "jobs.doctor": _SHARED | {"core", "jobs.doctor"},  # doctor validates the stack it observes
    "jobs.matrix": _SHARED | {"core", "schemas", "jobs.matrix"},  # refresh edits the matrix's rows; schema writes the schemas
    "entry": frozenset({"cli", "vocabulary"}),  # envkit/__main__.py
}
MAY_IMPORT["cli"] = frozenset(MAY_IMPORT) - {"entry"} | {"cli", "jobs"}  # the front end calls every floor
# (importer, imported) pairs the table does not allow, each with why
EXCEPTIONS = {
    ("envkit.export.container", "envkit.core.matrix_records"): "a type only: `image run-args --chip` is a matrix query",
}
VOCABULARY = frozenset({"envkit", "envkit.errors", "envkit.console", "envkit.resources", "envkit.records", "envkit.verdict",
                        "envkit.versions"})  # fmt: skip


def floor(module: str) -> str | None:
    """The floor of a module of the package (None: not envkit's)."""
    parts = module.split(".")
    if parts[0] != "envkit":
        return None
    if module in VOCABULARY or module == "envkit.__version__" or (len(parts) > 2 and ".".join(parts[:2]) in VOCABULARY):
        return "vocabulary"
    if module == "envkit.__main__":
        return "entry"
    if parts[1] == "jobs":
        return "jobs" if len(parts) == 2 else f"jobs.{parts[2]}"
    return parts[1]


# The resolver side and the modules that must not load it (derived from the table: every floor that may not import
# core), for the dynamic check of what importing them loads.
RESOLVER_SIDE = ("envkit.core", "envkit.models.matrix")
JOB_AREAS = tuple(sorted(f"envkit.{f}" for f in MAY_IMPORT if f.startswith("jobs.")))


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _job_files() -> list[Path]:
    """Every module of the jobs and the floors they stand on (lock and above) that may not import the resolver side."""
    return [
        p
        for p in sorted(PKG.rglob("*.py"))
        if (f := floor(_module_name(p))) in MAY_IMPORT
        and "core" not in MAY_IMPORT[f]
        and f not in ("vocabulary", "io", "models", "schemas")
    ]


def _imports(path: Path) -> set[str]:
    return _imports_of(path.read_text(), _module_name(path), path.name == "__init__.py")


def _imports_of(text: str, module: str, is_package: bool) -> set[str]:
    """Every module an import statement names, at any depth (relative imports resolved)."""
    tree = ast.parse(text)
    here = module.split(".")
    package = here if is_package else here[:-1]
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = ".".join(package[: len(package) - node.level + 1] + ([base] if base else []))
            out.add(base)
            out.update(f"{base}.{alias.name}" for alias in node.names)  # `from envkit.core import matrix`
    return out


def _forbidden(name: str) -> bool:
    return any(name == side or name.startswith(side + ".") for side in RESOLVER_SIDE)


def test_the_job_list_finds_the_jobs():
    names = {_module_name(p) for p in _job_files()}
    for must in (
        "envkit.lock.file",
        "envkit.export.image",
        "envkit.jobs.provision",
        "envkit.artifacts.closure",
        "envkit.jobs.bundle",
    ):
        assert must in names, f"{must} moved: update JOBS"


def test_the_static_check_sees_lazy_and_relative_imports():
    """The checker itself: an import inside a function and a relative import are both seen."""
    text = "def f():\n    from envkit.core.matrix import load_matrix\n    from ...core import constraints\n    from ...core.resolve import x\n"
    found = {m for m in _imports_of(text, "envkit.jobs.bundle.plan", False) if _forbidden(m)}
    assert {"envkit.core.matrix", "envkit.core.constraints", "envkit.core.resolve"} <= found
    assert not {
        m for m in _imports_of("from . import plan\nimport envkit.lock.file\n", "envkit.jobs.bundle", True) if _forbidden(m)
    }


def test_importing_the_jobs_loads_no_resolver_module():
    names = sorted({_module_name(p) for p in _job_files() if not p.name.startswith("_probe")})
    code = (
        "import importlib, sys\n"
        f"for name in {names!r}:\n"
        "    importlib.import_module(name)\n"
        f"side = {RESOLVER_SIDE!r}\n"
        "print('LOADED', sorted(m for m in sys.modules if any(m == s or m.startswith(s + '.') for s in side)))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "LOADED []" in p.stdout, p.stdout + p.stderr


def test_a_lock_of_the_previous_schema_asks_to_relock(run_cli, tmp_path):
    """Locks made before schema 2 are read with a clear message by every command that reads a lock."""
    import yaml

    new = tmp_path / "new.lock"
    assert run_cli("resolve", "-o", str(new)).code == 0
    doc = yaml.safe_load(new.read_text())
    doc["schema_version"] = 1
    doc.pop("platform")
    old = tmp_path / "old.lock"
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    for argv in (
        ("validate", str(old)),
        ("image", "render", "--lock", str(old), "-o", str(tmp_path / "img")),
        ("bundle", "build", "--lock", str(old), "-o", str(tmp_path / "b")),
        ("lock", "--lock", str(old), "-o", str(tmp_path / "x.lock")),
        ("image", "run-args", "--lock", str(old)),
    ):
        r = run_cli(*argv)
        assert r.code == 2, (argv, r.out, r.err)
        assert "schema 1" in r.err and "re-lock" in r.err and "envkit resolve" in r.err, (argv, r.err)
        assert "Traceback" not in r.err
    assert not (tmp_path / "img").exists() and not (tmp_path / "b").exists() and not (tmp_path / "x.lock").exists()


def _run_loaded(calls: str, arg: Path, also: str = "") -> subprocess.CompletedProcess:
    """`calls` (of envkit.cli's main, with `arg` as sys.argv[1]) in a fresh interpreter, which then prints `LOADED` and
    the typer/click modules it imported (and those the `also` condition names)."""
    code = (
        "import sys\n"
        "from envkit.cli import main\n"
        f"{calls}"
        f"print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in ('typer', 'click'){also}))\n"
    )
    return subprocess.run([sys.executable, "-c", code, str(arg)], cwd=ROOT, capture_output=True, text=True, timeout=120)


def test_resolve_and_validate_start_without_typer(tmp_path):
    p = _run_loaded(
        "for argv in (['resolve', '-o', sys.argv[1]], ['--quiet', 'validate', sys.argv[1], '--json']):\n"
        "    try:\n        main(argv)\n    except SystemExit as e:\n        assert not e.code, e.code\n",
        tmp_path / "l.lock",
    )
    assert "LOADED []" in p.stdout, p.stdout + p.stderr


@pytest.mark.parametrize(
    "argv",
    [
        ["resolve", "-o", "-"],
        ["resolve", "--chip", "a3", "--torch-npu", "2.6.0.post5", "-o", "-"],
        ["resolve", "--workload", "serving", "--vllm-ascend", "0.25.1rc1", "-o", "-"],
        ["resolve", "--workload", "nope", "-o", "-"],
        ["resolve", "--chip", "910b", "--python", "3.11", "--torch-npu", "2.2.0", "--json", "-o", "-"],
        ["resolve", "-f", "tests/data/stacks/bad-cp311.yaml", "-o", "-"],
        ["resolve", "--chip", "nope"],
        ["validate", "tests/data/stacks/bad-cp311.yaml"],
        ["validate", "tests/data/stacks/bad-cp311.yaml", "--json"],
        ["validate", "no-such-file.yaml"],
        ["bundle", "verify", "no-such-bundle"],
        ["bundle", "verify", "tests/data", "--json"],
        ["--quiet", "bundle", "verify", "tests/data"],
    ],
)
def test_the_start_up_path_and_typer_agree(argv, monkeypatch, capsys):
    """The start-up path `main()` takes (generated from the typer commands, envkit.cli.fast) reads argv as typer
    does: the same output and exit code."""
    import envkit.cli as cli

    monkeypatch.chdir(ROOT)

    def run(fast: bool) -> tuple[int, str, str]:
        if not fast:
            monkeypatch.setattr(cli, "_fast", lambda args: None)
        try:
            cli.main(list(argv))
            code = 0
        except SystemExit as exc:
            code = int(exc.code or 0)
        finally:
            monkeypatch.undo()
            monkeypatch.chdir(ROOT)
        out, err = capsys.readouterr()
        return code, out, err

    fast, slow = run(True), run(False)
    assert fast == slow
    assert fast[0] in (0, 1, 2) and "Traceback" not in fast[2]


# the modules of envkit/models/ that import no pydantic: what the start-up path may load
PYDANTIC_FREE_MODELS = ("envkit.models.stackkeys", "envkit.models.tables", "envkit.models.methods")
# a line of a child's program: print the pydantic modules and model modules it loaded
PRINT_LOADED = (
    "print('LOADED', sorted(m for m in sys.modules if m.split('.')[0] in ('pydantic', 'pydantic_core') "
    f"or m.startswith('envkit.models.') and m not in {PYDANTIC_FREE_MODELS!r}))\n"
)


def test_resolve_with_a_warm_matrix_store_loads_no_pydantic(tmp_path):
    """`envkit resolve` reads the compiled matrix store (plain records) and writes its lock from plain records: the
    pydantic models (the matrix's, which validate matrices/*.yaml; the lock's, which hold every lock that is read;
    the reports') and pydantic itself load only when the store misses or the stack is refused."""
    env = {**os.environ, "ENVKIT_CACHE_DIR": str(tmp_path / "cache")}
    code = (
        "import sys\n"
        "from envkit.cli import main\n"
        "try:\n    main(sys.argv[2:] + ['-o', sys.argv[1]])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        + PRINT_LOADED
    )
    lock = str(tmp_path / "l.lock")
    runs = [
        subprocess.run([sys.executable, "-c", code, lock, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
        for argv in (["resolve"], ["resolve"], ["resolve", "--workload", "serving", "--json"], ["resolve", "--chip", "a3"])
    ]
    assert "'envkit.models.matrix'" in runs[0].stdout, runs[0].stdout + runs[0].stderr  # the first run builds the store
    for p in runs[1:]:
        assert "LOADED []" in p.stdout, p.stdout + p.stderr


def test_bundle_verify_starts_without_typer_or_the_lock_gate(tmp_path):
    p = _run_loaded(
        "try:\n    main(['bundle', 'verify', sys.argv[1], '--json'])\nexcept SystemExit as e:\n    assert e.code == 2, e.code\n",
        tmp_path / "none",
        also=" or m in ('envkit.lock.file', 'envkit.core.matrix')",
    )
    assert "LOADED []" in p.stdout, p.stdout + p.stderr


def test_registering_the_lock_gate_loads_no_lock_module():
    """Every typer command runs inside the gate's block; a command that reads no lock must not pay for it."""
    code = (
        "import sys\n"
        "from envkit.cli import main\n"
        "try:\n    main(['matrix', 'show', 'chips'])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('LOADED', sorted(m for m in sys.modules if m in ('envkit.models.lock', 'envkit.lock.file', 'envkit.core.derive')))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "LOADED []" in p.stdout, p.stdout + p.stderr


# --- one room per job ---------------------------------------------------------------------------------------------
def _package_modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PKG.rglob("*.py"))}


def _edges(modules: dict[str, Path]) -> dict[str, set[str]]:
    """module -> the envkit modules its import statements name (`from a.b import c` is a.b.c where c is a module)."""
    out: dict[str, set[str]] = {}
    for name, path in modules.items():
        named = _imports(path)
        out[name] = {m for m in named if m in modules and m != name}
        # `from envkit.jobs.smoke import checks` names both envkit.jobs.smoke and envkit.jobs.smoke.checks: the package is only the
        # way to the module (Python imports it first anyway), so it is no edge of its own
        out[name] -= {m for m in out[name] if any(o.startswith(m + ".") for o in out[name])}
    return out


def _area(module: str) -> str | None:
    return next((a for a in JOB_AREAS if module == a or module.startswith(a + ".")), None)


def _crossings(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, dsts in sorted(edges.items()):
        if src.startswith("envkit.cli") or src == "envkit.__main__":
            continue  # the front end calls every job
        for dst in sorted(dsts):
            if _area(dst) is not None and _area(dst) != _area(src):
                kind = f"the job {_area(src)}" if _area(src) else "a shared layer"
                bad.append(f"{src} ({kind}) imports {dst} (the job {_area(dst)})")
    return bad


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges[root])))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on.add(root)
        while work:
            v, it = work[-1]
            w = next(it, None)
            if w is not None:
                if w not in index:
                    index[w] = low[w] = len(index)
                    stack.append(w)
                    on.add(w)
                    work.append((w, iter(sorted(edges.get(w, ())))))
                elif w in on:
                    low[v] = min(low[v], index[w])
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[v])
            if low[v] == index[v]:
                comp = []
                while True:
                    x = stack.pop()
                    on.discard(x)
                    comp.append(x)
                    if x == v:
                        break
                if len(comp) > 1:
                    found.append(sorted(comp))
    return found


def _floor_breaks(edges: dict[str, set[str]]) -> list[str]:
    bad = []
    for src, dsts in sorted(edges.items()):
        here = floor(src)
        for dst in sorted(dsts):
            there = floor(dst)
            if there is None or here is None or there in MAY_IMPORT.get(here, ()) or (src, dst) in EXCEPTIONS:
                continue
            if there == "jobs":  # `from envkit.jobs import bundle`: the package on the way to the job's module
                continue
            bad.append(f"{src} ({here}) imports {dst} ({there}): {here} may import {', '.join(sorted(MAY_IMPORT[here]))}")
    return bad


def test_every_module_has_a_floor_and_the_table_names_every_folder():
    modules = _package_modules()
    homeless = sorted(m for m in modules if floor(m) not in MAY_IMPORT and floor(m) != "jobs")
    assert not homeless, f"modules in no floor of MAY_IMPORT (add their folder): {homeless}"
    folders = {p.name for p in PKG.iterdir() if (p / "__init__.py").is_file()} - {"jobs"}
    jobs = {f"jobs.{p.name}" for p in (PKG / "jobs").iterdir() if (p / "__init__.py").is_file()}
    assert folders | jobs <= set(MAY_IMPORT), sorted(folders | jobs - set(MAY_IMPORT))


def test_each_floor_imports_only_the_floors_below_it():
    """The folder table, on every import statement of the package (lazy and TYPE_CHECKING ones too)."""
    bad = _floor_breaks(_edges(_package_modules()))
    assert not bad, "imports the table does not allow:\n" + "\n".join(bad)
    for (src, dst), why in EXCEPTIONS.items():
        assert dst in _edges(_package_modules()).get(src, set()), f"stale exception {src} -> {dst} ({why})"


def test_the_table_check_sees_a_floor_broken():
    edges = {
        "envkit.io.jsonread": {"envkit.models.lock"},  # io under models
        "envkit.export.k8s": {"envkit.jobs.k8s.render"},  # a shared floor into a job
        "envkit.jobs.k8s.render": {"envkit.core.matrix", "envkit.lock.file"},  # a job into the resolver side
        "envkit.jobs.doctor.diagnose": {"envkit.core.validation"},  # allowed: doctor validates
        "envkit.cli.k8s": {"envkit.jobs.k8s.render"},
    }
    assert _floor_breaks(edges) == [
        "envkit.export.k8s (export) imports envkit.jobs.k8s.render (jobs.k8s): export may import artifacts, export, "
        "fleet, io, lock, models, vocabulary",
        "envkit.io.jsonread (io) imports envkit.models.lock (models): io may import io, vocabulary",
        "envkit.jobs.k8s.render (jobs.k8s) imports envkit.core.matrix (core): jobs.k8s may import artifacts, executor, "
        "export, fleet, io, jobs.k8s, lock, models, vocabulary",
    ]


def test_the_container_facts_are_the_bottom_of_export_and_every_runtime_reads_them():
    """`envkit.export.container` imports no other export module; the image plan, run-args and k8s import it, and no
    export module but it computes a container's environment or devices (no `plan_env`, `run_args` body elsewhere)."""
    edges = _edges(_package_modules())
    below = sorted(d for d in edges["envkit.export.container"] if d.startswith("envkit.export."))
    assert not below, f"envkit.export.container imports {below}: it is the bottom of export"
    for reader in ("envkit.export.image", "envkit.export.runargs", "envkit.export.k8s"):
        assert "envkit.export.container" in edges[reader], f"{reader} does not read the container facts"


def test_the_hccl_rules_take_the_locks_facts_and_per_node_values_not_inventory_hosts():
    """`envkit.fleet.env` works over the lock's own HCCL facts and each node's values: it imports neither the
    inventory (no made-up hosts for k8s's pods) nor the matrix's HCCL loader (no second shape of the same facts), and
    neither launch nor k8s converts the lock's facts before handing them over."""
    edges = _edges(_package_modules())
    assert not {"envkit.fleet.inventory", "envkit.fleet.data"} & edges["envkit.fleet.env"], edges["envkit.fleet.env"]
    for reader in ("envkit.export.k8s", "envkit.jobs.launch.render"):
        assert "envkit.fleet.env" in edges[reader] and "envkit.fleet.data" not in edges[reader], (reader, edges[reader])


def test_no_job_imports_another_and_no_shared_layer_imports_a_job():
    bad = _crossings(_edges(_package_modules()))
    assert not bad, "imports into a job from outside it:\n" + "\n".join(bad)


def test_no_import_circle_in_the_package():
    circles = _circles(_edges(_package_modules()))
    assert not circles, f"import circles: {circles}"


def test_the_checks_see_a_crossing_and_a_circle():
    """The checkers themselves, on a made-up graph: a job reaching into another, a shared layer into a job (lazy
    imports count), a circle through three modules; and a package named on the way to its module is no edge."""
    texts = {
        "envkit.jobs.launch.profile": "def f():\n    from envkit.jobs.provision import dump_vars\n",
        "envkit.fleet.hccn": "from envkit.jobs.doctor import observe\n",
        "envkit.a": "import envkit.b\n",
        "envkit.b": "from envkit import c\n",
        "envkit.c": "from envkit.a import x\n",
        "envkit.jobs.smoke.runner": "from envkit.jobs.smoke import checks\nfrom envkit.executor.dist import free_port\n",
    }
    modules = {*texts, "envkit.jobs.provision", "envkit.jobs.doctor", "envkit.jobs.doctor.observe", "envkit.jobs.smoke", "envkit.jobs.smoke.checks",
               "envkit.fleet", "envkit.executor.dist"}  # fmt: skip
    edges = {m: set() for m in modules}
    for m, text in texts.items():
        named = _imports_of(text, m, False)
        edges[m] = {n for n in named if n in modules and n != m}
        edges[m] -= {n for n in edges[m] if any(o.startswith(n + ".") for o in edges[m])}
    assert _crossings(edges) == [
        "envkit.fleet.hccn (a shared layer) imports envkit.jobs.doctor.observe (the job envkit.jobs.doctor)",
        "envkit.jobs.launch.profile (the job envkit.jobs.launch) imports envkit.jobs.provision (the job envkit.jobs.provision)",
    ]
    assert _circles(edges) == [["envkit.a", "envkit.b", "envkit.c"]]
    assert edges["envkit.jobs.smoke.runner"] == {"envkit.jobs.smoke.checks", "envkit.executor.dist"}


def test_a_schema_2_lock_is_upgraded_on_read_with_a_notice(run_cli, tmp_path):
    """Schema 3 adds platform.device_plugin_resource and platform.hccl (and the optional platform.kubernetes), derived
    from the stack's chip: a schema-2 lock is read as schema 3 (the lock module's one migration seam) by every
    command, saying so; a library caller that registers no upgrade gets the re-lock refusal."""
    import yaml

    from envkit.errors import BadInput
    from envkit.lock.file import read_lock

    new = tmp_path / "new.lock"
    assert run_cli("resolve", "--chip", "a3", "-o", str(new)).code == 0
    doc = yaml.safe_load(new.read_text())
    doc["schema_version"], new_version = 2, doc["envkit_version"]
    facts = {k: doc["platform"].pop(k) for k in ("device_plugin_resource", "hccl", "kubernetes")}
    old = tmp_path / "old.lock"
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    for argv in (("validate", str(old)), ("image", "run-args", "--lock", str(old), "--format", "json")):
        r = run_cli(*argv)
        assert r.code == 0, (argv, r.out, r.err)
        assert r.err.count(f"notice: {old} is a lock of schema 2; read as schema 3") == 1, argv
        assert "platform.device_plugin_resource, platform.hccl, platform.kubernetes derived" in r.err
    from envkit.core.derive import matrix_check

    lifted = read_lock(old, matrix_check())
    assert lifted.schema_version == 3 and lifted.platform.device_plugin_resource == facts["device_plugin_resource"]
    assert lifted.platform.hccl.model_dump(mode="json") == facts["hccl"]
    assert lifted.platform.kubernetes is not None and lifted.platform.kubernetes.model_dump(mode="json") == facts["kubernetes"]
    with pytest.raises(BadInput, match="is a lock of schema 2, made by an older envkit: re-lock it"):
        read_lock(old)
    doc["envkit_version"] = "not a version"  # lifted, then refused by the schema: an error, no notice
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("image", "run-args", "--lock", str(old))
    assert r.code == 2 and "envkit_version" in r.err and "notice:" not in r.err, r.err
    doc["envkit_version"] = new_version
    doc["stack"]["chip"] = "nope"  # nothing to derive from: refused by the schema as before
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("image", "run-args", "--lock", str(old))
    assert r.code == 2 and "re-lock" in r.err and "notice:" not in r.err


def test_the_upgrade_notice_names_no_untrusted_text_and_lifts_int_schemas_only(run_cli, tmp_path):
    """The notice comes only for a lifted lock that holds to the schema (a `generated_by` with terminal escapes is
    refused first, never echoed), names a re-lock command only when it is envkit's, and a schema_version of 2.0 (a
    float) or "2" is not lifted (then refused as before)."""
    import yaml

    new = tmp_path / "new.lock"
    assert run_cli("resolve", "-o", str(new)).code == 0
    doc = yaml.safe_load(new.read_text())
    for k in ("device_plugin_resource", "hccl"):
        doc["platform"].pop(k)
    doc["schema_version"], doc["generated_by"] = 2, "envkit resolve \x1b]0;pwned\x07"
    old = tmp_path / "old.lock"
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("image", "run-args", "--lock", str(old))  # refused by the schema before any notice
    assert r.code == 2 and "notice:" not in r.err and "\x1b" not in r.err
    doc["generated_by"] = "make lock"  # valid text, but not an envkit command line: not offered as the way to re-lock
    old.write_text(yaml.safe_dump(doc, sort_keys=False))
    r = run_cli("image", "run-args", "--lock", str(old))
    assert r.code == 0 and "notice:" in r.err and "re-lock to write it: `envkit resolve`" in r.err
    for version in (2.0, "2"):
        doc["schema_version"], doc["generated_by"] = version, "envkit resolve"
        old.write_text(yaml.safe_dump(doc, sort_keys=False))
        r = run_cli("image", "run-args", "--lock", str(old))
        assert r.code == 2 and "notice:" not in r.err, (version, r.err)
