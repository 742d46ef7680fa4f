#!/usr/bin/env python3
"""Data paths, measured: while one command runs in-process, the places (distinct envkit functions, methods and
lambdas) a value of one type is handed to as an argument, and the modules they lie in. Issue 36's three paths:

- derive: `envkit resolve`, following the solver's `Resolution` (from the solve to the lock written);
- k8s: `envkit k8s render --node n1` of the default lock, following the `Lock`;
- bundle: `envkit bundle build` of a lock whose closure is three small wheels served from 127.0.0.1, following
  the `BuildRequest`.

    python tools/data_path.py                        # this tree
    python tools/data_path.py --tree /tmp/old --json # another checkout (e.g. `git worktree add /tmp/old REV`)

Values are matched by their class name (`Resolution`, `Lock`, `BuildRequest`), so a tree from before the layout
move (issue 36 item 1, where the same classes lived in other modules) is measured the same way. A place is counted
once however often it is called; what a function receives is what its parameters hold at its call. Each path runs
in a process of its own, as each command is a run of envkit of its own: what one path left in memory (the matrix
loaded, a lock already checked) would hide functions from the next. The figures are a diagnostic, not a gate: the tool exits 0 whatever they are.
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import importlib
import importlib.util
import io
import json
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from types import CodeType, FrameType
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
IMAGE = "registry.example/envkit@sha256:" + "0" * 64  # k8s render needs the image the cluster pulls


class Trace:
    """The envkit functions called with a value whose class is named `kind`, in the order first reached; and the
    distinct envkit functions (`_named`) run beneath the step `entry` (a function's qualified name): the trip the
    step takes."""

    def __init__(self, kind: str, entry: str) -> None:
        self.kind = kind
        self.entry = entry
        self.places: dict[str, str] = {}  # "module:qualname" -> module
        self.beneath: dict[str, str] = {}
        self._inside: FrameType | None = None

    def __call__(self, frame: FrameType, event: str, _arg: Any) -> None:
        if event == "return" and frame is self._inside:
            self._inside = None
        if event != "call":
            return
        module = frame.f_globals.get("__name__", "")
        if not (module == "envkit" or module.startswith("envkit.")):
            return
        code = frame.f_code
        if self._inside is None and _qualname(code) == self.entry and not self.beneath:
            self._inside = frame
        if self._inside is not None and (name := _named(code)) is not None:
            self.beneath.setdefault(f"{module}:{name}", module)
        n = code.co_argcount + code.co_kwonlyargcount + bool(code.co_flags & 0x04) + bool(code.co_flags & 0x08)
        for name in code.co_varnames[:n]:
            value = frame.f_locals.get(name)
            values = value if isinstance(value, tuple) else value.values() if isinstance(value, dict) else (value,)
            if any(type(v).__name__ == self.kind for v in values):
                self.places.setdefault(f"{module}:{_qualname(code)}", module)
                return

    @contextlib.contextmanager
    def running(self) -> Iterator[Trace]:
        sys.setprofile(self)
        try:
            yield self
        finally:
            sys.setprofile(None)

    def summary(self) -> dict[str, Any]:
        def grouped(places: dict[str, str]) -> dict[str, list[str]]:
            return {m: sorted(p for p, pm in places.items() if pm == m) for m in sorted(set(places.values()))}

        return {
            "follows": self.kind,
            "places": len(self.places),
            "modules": len(set(self.places.values())),
            "by_module": grouped(self.places),
            "step": self.entry,
            "step_functions": len(self.beneath),
            "step_modules": len(set(self.beneath.values())),
            "step_by_module": grouped(self.beneath),
        }


def _qualname(code: CodeType) -> str:
    return str(getattr(code, "co_qualname", code.co_name))  # Python 3.11 on; 3.10 has the bare name only


def _named(code: CodeType) -> str | None:
    """The function a code object belongs to: a comprehension, lambda or local function counts as the function that
    holds it; a module or class body, and the `__init__` a dataclass generates, count as none."""
    name = _qualname(code).split(".<locals>.", 1)[0]
    if name.startswith("<") or name == "__create_fn__" or not code.co_flags & 0x02:  # CO_NEWLOCALS: not a body
        return None
    return name


def _first(*names: str) -> Any:
    """`module:attr` of this layout or the one before issue 36's move, whichever imports."""
    for name in names:
        mod, _, attr = name.partition(":")
        try:
            return getattr(importlib.import_module(mod), attr)
        except (ImportError, AttributeError):
            continue
    raise SystemExit(f"none of {names} imports from {ROOT if 'envkit' not in sys.modules else sys.modules['envkit'].__file__}")


def _cli(argv: list[str]) -> None:
    main = _first("envkit.cli:main")
    said = io.StringIO()
    try:
        with contextlib.redirect_stdout(said), contextlib.redirect_stderr(said):
            main(argv)
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise SystemExit(f"envkit {' '.join(argv)} exited {exc.code}:\n{said.getvalue()[-3000:]}") from None


def _test_helper(relpath: str) -> Any:
    """A module of this checkout's tests (its stand-in wheels and 127.0.0.1 server), loaded by file: `tests` on
    sys.path may be the measured tree's."""
    spec = importlib.util.spec_from_file_location(f"_data_path_{Path(relpath).stem}", ROOT / relpath)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _closure_lock(lock: Path, folder: Path, url: str) -> None:
    """The resolved lock with a closure of three stand-in wheels (and one for the controller) at `url`."""
    read_lock = _first("envkit.lock.file:read_lock", "envkit.lockfile:read_lock")
    dump_lock = _first("envkit.lock.file:dump_lock", "envkit.lockfile:dump_lock")
    make_target = _first("envkit.artifacts.closure:make_target", "envkit.closure:make_target")
    from envkit.models.lock import ClosurePackage, PythonClosure

    fake_wheel = _test_helper("tests/airgap/conftest.py").fake_wheel

    def closure(rows: list[tuple[str, str]], python: str, arch: str) -> Any:
        pkgs = []
        for name, version in rows:
            filename, data = fake_wheel(name, version)
            (folder / filename).write_bytes(data)
            pkgs.append(
                ClosurePackage(
                    name=name,
                    version=version,
                    filename=filename,
                    url=f"{url}/{filename}",
                    sha256=hashlib.sha256(data).hexdigest(),
                    size=len(data),
                )
            )
        return PythonClosure(
            target=make_target(python, arch),
            roots=[n for n, _ in rows],
            index_url=url,
            resolver="data_path",
            packages=pkgs,
            mirrors=[f"{url}/"],
        )

    lk = read_lock(lock)
    py = lk.python.model_copy(
        update={
            "closure": closure([("alpha", "1.0"), ("beta", "1.0"), ("delta", "1.0")], lk.stack.python, lk.stack.arch),
            "controller": closure([("gamma", "1.0")], "3.11", "x86_64"),
        }
    )
    lock.write_text(dump_lock(lk.model_copy(update={"python": py})))


def _scenario(name: str, work: Path) -> tuple[str, str, list[str]]:
    """The class followed, the step and the command of the path `name`, over what `prepare` left in `work`."""
    lock = work / "envkit.lock"
    return {
        "derive": ("Resolution", "derive", ["resolve", "-o", str(work / "derived.lock")]),
        "k8s": (
            "Lock",
            "plan_k8s",
            ["k8s", "render", "--lock", str(lock), "-o", str(work / "k8s"), "--node", "n1", "--image", IMAGE],
        ),
        "bundle": (
            "BuildRequest",
            "build",
            ["bundle", "build", "--lock", str(work / "bundled.lock"), "-o", str(work / "bundle"), "-j", "2"],
        ),
    }[name]


def prepare(paths: list[str], work: Path, url: str) -> None:
    """The inputs of the paths: the default lock, and for bundle the same lock with a closure served at `url`."""
    lock = work / "envkit.lock"
    _cli(["resolve", "-o", str(lock)])
    if "bundle" in paths:
        bundled = work / "bundled.lock"
        bundled.write_text(lock.read_text())
        _closure_lock(bundled, work / "srv", url)


def measure_one(name: str, work: Path) -> dict[str, Any]:
    """One path, traced in this process (a fresh one: `measure` starts one per path, as each command is its own
    run of envkit; what a path before it left in memory, the matrix loaded or a lock already checked, would hide
    the functions a real run calls)."""
    kind, entry, argv = _scenario(name, work)
    with Trace(kind, entry).running() as trace:
        _cli(argv)
    return trace.summary()


def measure(paths: list[str], work: Path, tree: Path) -> dict[str, Any]:
    (work / "srv").mkdir()
    out: dict[str, Any] = {}
    with _test_helper("tests/airgap/httpserve.py").Server(work / "srv") as server:
        prepare(paths, work, server.url)
        for name in paths:
            r = subprocess.run(
                [sys.executable, __file__, "--tree", str(tree), "--one", name, "--work", str(work)],
                capture_output=True,
                text=True,
                check=False,
            )
            if r.returncode != 0:
                raise SystemExit(f"the {name} path failed:\n{r.stderr[-3000:]}")
            out[name] = json.loads(r.stdout)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tree", type=Path, default=ROOT, help="the checkout whose envkit is measured (default: this one)")
    ap.add_argument("--paths", default="derive,k8s,bundle", help="comma-separated: derive, k8s, bundle")
    ap.add_argument("--json", action="store_true", help="every place, as JSON")
    ap.add_argument("--one", choices=("derive", "k8s", "bundle"), help=argparse.SUPPRESS)  # a child: one path
    ap.add_argument("--work", type=Path, help=argparse.SUPPRESS)
    args = ap.parse_args()
    tree = args.tree.resolve()
    sys.path.insert(0, str(tree))
    os.chdir(tree)
    if args.one:
        print(json.dumps(measure_one(args.one, args.work)))
        return 0
    paths = [p.strip() for p in args.paths.split(",") if p.strip()]
    with tempfile.TemporaryDirectory(prefix="envkit-data-path-") as tmp:
        os.environ["ENVKIT_CACHE_DIR"] = str(Path(tmp) / "cache")  # the children inherit it
        result = measure(paths, Path(tmp), tree)
    if args.json:
        print(json.dumps(result, indent=2, sort_keys=True))
    else:
        for name, r in result.items():
            print(
                f"{name}: {r['follows']} reaches {r['places']} places in {r['modules']} modules; "
                f"{r['step']}() runs {r['step_functions']} functions in {r['step_modules']} modules"
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
