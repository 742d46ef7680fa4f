"""One command style (issue 36): parse -> request -> one job -> format.

Every command group's module under envkit/cli/ declares its commands as module-level functions, which `register`
only wires to the app (no command is a closure built inside it). Below the CLI, a command module reaches the work
through its own job alone (`envkit.jobs.<group>`): besides it, it imports the CLI's own modules, the vocabulary
(`envkit.console`, `envkit.errors`, ...), the models and the lock interface, never a shared floor (artifacts, fleet,
export, executor, io) nor the resolver (core) nor another job. `resolve` and `validate` are the resolver's own
commands (no job stands between them and it): their body module (`stack_body`) calls `envkit.core`.
The checks are static (every import statement, lazy ones inside functions included).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from envkit.cli import COMMAND_MODULES, COMMANDS

CLI = Path(__file__).resolve().parents[2] / "envkit" / "cli"
# The modules of the command line that are no command group's: the entry point and error boundary, the start-up
# parser and its generated table, the shared option types and the `Example:` epilog.
FRONT = {"__init__", "fast", "_fastspec", "options", "examples"}
# Each command module and the job it calls: a group's own, or the group's whose body it holds (bundle verify's).
JOB_OF = {
    "stack": "core",
    "stack_body": "core",
    "bundle_verify": "bundle",
    **{m: m for m in COMMAND_MODULES if m != "stack"},
}
VOCABULARY = {
    "envkit",
    "envkit.console",
    "envkit.errors",
    "envkit.records",
    "envkit.resources",
    "envkit.verdict",
    "envkit.versions",
}
ALWAYS = ("envkit.cli", "envkit.models", "envkit.lock")


def _modules() -> dict[str, Path]:
    return {p.stem: p for p in sorted(CLI.glob("*.py")) if p.stem not in FRONT}


def _envkit_imports(tree: ast.AST) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "envkit"}
        elif isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "envkit":
            out.add(node.module or "")
            if node.module == "envkit.jobs":  # `from envkit.jobs import bundle`
                out |= {f"envkit.jobs.{a.name}" for a in node.names}
    return out


def _under(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _foreign(name: str, job: str) -> bool:
    """Whether a command module calling `job` may not import `name`."""
    own = "envkit.core" if job == "core" else f"envkit.jobs.{job}"
    if name in VOCABULARY or name == "envkit.jobs" or any(_under(name, p) for p in (*ALWAYS, own)):
        return False
    return True


def _closures(tree: ast.Module) -> list[str]:
    """The functions and lambdas defined inside a module-level `register`."""
    return [
        getattr(node, "name", "lambda")
        for top in tree.body
        if isinstance(top, ast.FunctionDef) and top.name == "register"
        for node in ast.walk(top)
        if node is not top and isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
    ]


def test_every_command_module_is_in_the_table_and_every_group_is_one():
    assert set(_modules()) == set(JOB_OF), sorted(set(_modules()) ^ set(JOB_OF))
    assert set(COMMANDS.values()) == set(COMMAND_MODULES)


@pytest.mark.parametrize("name", sorted(COMMAND_MODULES))
def test_register_only_wires_module_level_commands(name):
    tree = ast.parse((CLI / f"{name}.py").read_text())
    assert not _closures(tree), f"envkit/cli/{name}.py defines commands inside register: {_closures(tree)}"
    top = {n.name for n in tree.body if isinstance(n, ast.FunctionDef)}
    register = next(n for n in tree.body if isinstance(n, ast.FunctionDef) and n.name == "register")
    wired = {
        arg.id
        for node in ast.walk(register)
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Call)  # group.command(NAME, ...)(function)
        for arg in node.args
        if isinstance(arg, ast.Name)
    }
    assert wired and wired <= top, (name, sorted(wired - top))


@pytest.mark.parametrize("name", sorted(JOB_OF))
def test_a_command_module_reaches_the_work_through_its_own_job(name):
    found = sorted(m for m in _envkit_imports(ast.parse(_modules()[name].read_text())) if _foreign(m, JOB_OF[name]))
    assert not found, f"envkit/cli/{name}.py (job {JOB_OF[name]}) imports {found}: move that work into its job"


def test_the_checks_see_a_closure_and_a_foreign_import():
    text = (
        "def register(app):\n"
        "    @app.command('x')\n"
        "    def x():\n"
        "        from envkit.fleet.hccn import parse_peers\n"
        "        from envkit.jobs import smoke\n"
        "        from envkit.jobs.doctor import run_doctor\n"
        "        from envkit.lock.file import read_lock\n"
    )
    tree = ast.parse(text)
    assert _closures(tree) == ["x"]
    found = sorted(m for m in _envkit_imports(tree) if _foreign(m, "doctor"))
    assert found == ["envkit.fleet.hccn", "envkit.jobs.smoke"]
