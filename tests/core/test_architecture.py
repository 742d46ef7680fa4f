"""The layers: jobs stand on the lock alone, never on the matrix or the resolver.

matrix -> constraints -> resolve -> locking (derive a lock) -> envkit.lock -> lockfile (read, write) -> jobs.
The check is static (every import statement of a job module, lazy ones inside functions too) and dynamic (what
importing the module really loads), so neither a top-level nor a function-level import slips through.
"""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PKG = ROOT / "envkit"

# The resolver side: what only `resolve`, `validate`, `matrix` and `doctor` (which validates an observed stack) use.
RESOLVER_SIDE = (
    "envkit.matrix",
    "envkit.constraints",
    "envkit.resolve",
    "envkit.locking",
    "envkit.validation",
    "envkit.stackfile",
    "envkit.models.matrix",
)
# The jobs and what they stand on. A package named here counts with every module in it.
JOBS = (
    "envkit.lockfile",
    "envkit.image",
    "envkit.render",
    "envkit.engine",
    "envkit.airgap",
    "envkit.provision",
    "envkit.ansible_runner",
    "envkit.closure",
    "envkit.download",
    "envkit.uptodate",
    "envkit.wheels",
    "envkit.fsutil",
    "envkit.httpclient",
    "envkit.untrusted",
    "envkit.launch",
    "envkit.smoke",
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(ROOT).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _job_files() -> list[Path]:
    files = []
    for job in JOBS:
        base = ROOT / Path(*job.split("."))
        if base.is_dir():
            files += sorted(base.rglob("*.py"))
        elif base.with_suffix(".py").is_file():
            files.append(base.with_suffix(".py"))
    return files


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
            out.update(f"{base}.{alias.name}" for alias in node.names)  # `from envkit import matrix`
    return out


def _forbidden(name: str) -> bool:
    return any(name == side or name.startswith(side + ".") for side in RESOLVER_SIDE)


def test_the_job_list_finds_the_jobs():
    names = {_module_name(p) for p in _job_files()}
    for must in ("envkit.lockfile", "envkit.image", "envkit.provision", "envkit.closure", "envkit.airgap"):
        assert must in names, f"{must} moved: update JOBS"


@pytest.mark.parametrize("path", _job_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_job_module_imports_the_matrix_or_the_resolver(path: Path):
    bad = sorted(m for m in _imports(path) if _forbidden(m))
    assert not bad, f"{path.relative_to(ROOT)} imports {bad}: a job reads the lock, never the matrix or the resolver"


def test_the_static_check_sees_lazy_and_relative_imports():
    """The checker itself: an import inside a function and a relative import are both seen."""
    text = "def f():\n    from envkit.matrix import load_matrix\n    from .. import constraints\n    from ..resolve import x\n"
    found = {m for m in _imports_of(text, "envkit.airgap.plan", False) if _forbidden(m)}
    assert {"envkit.matrix", "envkit.constraints", "envkit.resolve"} <= found
    assert not {m for m in _imports_of("from . import plan\nimport envkit.lockfile\n", "envkit.airgap", True) if _forbidden(m)}


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
    """The argparse path `main()` takes and the typer command give the same output and exit code."""
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


def test_bundle_verify_starts_without_typer_or_the_lock_gate(tmp_path):
    p = _run_loaded(
        "try:\n    main(['bundle', 'verify', sys.argv[1], '--json'])\nexcept SystemExit as e:\n    assert e.code == 2, e.code\n",
        tmp_path / "none",
        also=" or m in ('envkit.lockfile', 'envkit.matrix')",
    )
    assert "LOADED []" in p.stdout, p.stdout + p.stderr


def test_registering_the_lock_gate_loads_no_lock_module():
    """Every typer command runs inside the gate's block; a command that reads no lock must not pay for it."""
    code = (
        "import sys\n"
        "from envkit.cli import main\n"
        "try:\n    main(['matrix', 'show', 'chips'])\nexcept SystemExit as e:\n    assert not e.code, e.code\n"
        "print('LOADED', sorted(m for m in sys.modules if m in ('envkit.models.lock', 'envkit.lockfile', 'envkit.locking')))\n"
    )
    p = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "LOADED []" in p.stdout, p.stdout + p.stderr
