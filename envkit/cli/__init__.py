"""The `envkit` command line: parse, call one library function, format. The single error boundary is `main()`.

Only the command group that argv names is imported and built (`envkit resolve` does not pay for the
smoke, bundle or image commands); `envkit --help`, an unknown command and anything unusual get the
whole tree, so help, suggestions and errors are the same as with every group registered.
The command modules do without `from __future__ import annotations`: typer would eval() each string
annotation of every parameter on every run.
"""

from __future__ import annotations

import importlib
import sys
from typing import TYPE_CHECKING, Optional

from envkit import __version__, console
from envkit.errors import EXIT_INTERNAL, EXIT_INTERRUPTED, EnvkitError

if TYPE_CHECKING:
    import typer

    from envkit.export.container import ChipDevices
    from envkit.lock.gate import LockCheck

HELP = "Resolve, build, bundle, provision and prove Ascend NPU PyTorch stacks."

# Each module registers its commands on the app through `register(app)`, in this order.
COMMAND_MODULES = ["stack", "matrix", "smoke", "doctor", "bundle", "image", "provision", "launch", "k8s", "scan"]
# Top-level command -> the module that registers it. A name not listed here builds the whole tree.
COMMANDS: dict[str, str] = {
    "resolve": "stack",
    "validate": "stack",
    "matrix": "matrix",
    "smoke": "smoke",
    "compare": "smoke",
    "doctor": "doctor",
    "lock": "bundle",
    "bundle": "bundle",
    "image": "image",
    "provision": "provision",
    "launch": "launch",
    "k8s": "k8s",
    "scan": "scan",
}
# Root options that take no value and may come before the command.
_ROOT_FLAGS = frozenset({"--debug", "--quiet", "-q", "--accept-edited-lock"})
ACCEPT_EDITED = "--accept-edited-lock"


def build_app(modules: list[str] | None = None) -> typer.Typer:
    """The `envkit` app with the commands of `modules` (default: every command group)."""
    import typer

    from envkit.cli.examples import example

    def _version_callback(value: bool) -> None:
        if value:
            typer.echo(f"envkit {__version__}")
            raise typer.Exit(0)

    def _root(
        version: Optional[bool] = typer.Option(
            None, "--version", callback=_version_callback, is_eager=True, help="Print the version."
        ),
        debug: bool = typer.Option(False, "--debug", help="Show tracebacks of errors."),
        quiet: bool = typer.Option(False, "--quiet", "-q", help="Silence progress output."),
        accept_edited_lock: bool = typer.Option(
            False,
            ACCEPT_EDITED,
            help="Use a lock whose derived fields differ from what the matrix gives for its stack (edited on purpose): "
            "a warning naming the fields instead of a refusal. The schema is enforced all the same.",
        ),
    ) -> None:
        console.set_debug(debug)
        console.set_quiet(quiet)

    app = typer.Typer(
        name="envkit",
        help=HELP,
        no_args_is_help=True,
        pretty_exceptions_enable=False,
        # --install-completion / --show-completion: typer's shell completion (bash, zsh, fish, PowerShell); the shell
        # then calls `envkit` with _ENVKIT_COMPLETE set and no arguments, which builds the whole tree
        add_completion=True,
        rich_markup_mode=None,
        epilog=example(
            "envkit resolve --chip a3 -o a3.lock", "envkit --quiet smoke --device cpu --dtype fp32 --out runs/cpu-fp32"
        ),
    )
    app.callback()(_root)
    for name in COMMAND_MODULES if modules is None else modules:
        try:
            module = importlib.import_module(f"envkit.cli.{name}")
        except ModuleNotFoundError as exc:  # a command group not written yet
            if exc.name == f"envkit.cli.{name}":
                continue
            raise
        module.register(app)
    return app


def _modules_for(args: list[str]) -> list[str] | None:
    """The one command module argv needs, or None (help, version, unknown command: the whole tree)."""
    for arg in args:
        if arg in _ROOT_FLAGS:
            continue
        if arg.startswith("-"):
            return None
        module = COMMANDS.get(arg)
        return [module] if module else None
    return None


_full_app: typer.Typer | None = None


def __getattr__(name: str) -> typer.Typer:
    """`envkit.cli.app`: the whole command tree, built on first use (e.g. by typer's CliRunner)."""
    global _full_app
    if name != "app":
        raise AttributeError(name)
    if _full_app is None:
        _full_app = build_app()
    return _full_app


def _wants_json(argv: list[str]) -> bool:
    return "--json" in argv


def _report_error(exc: EnvkitError, argv: list[str]) -> int:
    if _wants_json(argv):
        console.emit_json({"error": exc.to_dict()})
    lines = [f"error: {exc.message}"]
    if exc.where and str(exc.where):
        lines.append(f"  where: {exc.where}")
    if exc.hint:
        for i, hint_line in enumerate(exc.hint.splitlines()):
            lines.append(("  next: " if i == 0 else "        ") + hint_line)
    console.err.print("\n".join(lines), markup=False)
    return exc.exit_code


def _fast(args: list[str]) -> int | None:
    """`envkit [--debug|--quiet] resolve|validate|bundle verify ...` without typer: the start-up path generated from
    the typer commands (`envkit.cli.fast`); None: use typer."""
    i = len(_root_args(args))
    if i >= len(args):
        return None
    from envkit.cli import fast

    if not fast.is_fast(args[i:]):
        return None
    console.set_debug("--debug" in args[:i])
    console.set_quiet(any(a in ("--quiet", "-q") for a in args[:i]))
    return fast.run(args[i:])


def _root_args(args: list[str]) -> list[str]:
    """The root options before the command."""
    i = 0
    while i < len(args) and args[i] in _ROOT_FLAGS:
        i += 1
    return args[:i]


def lock_check(ctx: typer.Context) -> LockCheck:
    """The check every lock a command reads is held to (`envkit.lock.file.read_lock(path, check)`): what the matrix
    derives for its stack (`envkit.core.derive.gate`), older schemas lifted (`envkit.core.derive.upgrade`), an edit a warning
    with --accept-edited-lock. Built from the invocation's root options (`ctx`, the command's context); neither the
    lock model nor the matrix loads until a lock is read."""
    from envkit.lock.gate import LockCheck

    accept = bool(ctx.find_root().params.get("accept_edited_lock"))
    return LockCheck(gate=_matrix_gate, upgrade=_matrix_upgrade, accept_edited=accept)


def chip_devices(chip: str) -> ChipDevices:
    """A chip's device facts from its matrix row (BadInput naming the known chips): the chip lookup the command line
    hands `envkit image run-args --chip`, a matrix query, as it hands every command the lock check (a job reads no
    matrix)."""
    from envkit.jobs.matrix import chip_devices as lookup

    return lookup(chip)


def _matrix_upgrade(data, where):  # noqa: ANN001, ANN202
    """`envkit.core.derive.upgrade` (a lock of an older schema lifted on read), imported only when one is read."""
    from envkit.core.derive import upgrade

    return upgrade(data, where)


def _matrix_gate(lock, where):  # noqa: ANN001, ANN202
    """`envkit.core.derive.gate`, imported when a lock is read (a command that reads none does not load the matrix)."""
    from envkit.core.derive import gate

    return gate(lock, where)


def main(argv: list[str] | None = None) -> None:
    """Entry point of the console script. Exits with the error's own code. Every command that reads a lock passes
    `lock_check(ctx)` with it: the lock is compared with what the matrix derives for its stack."""
    args = list(sys.argv[1:] if argv is None else argv)
    debug = "--debug" in args
    try:
        code = _fast(args)
        if code is None:
            import typer.main

            command = typer.main.get_command(build_app(_modules_for(args)))
            # standalone mode: click prints usage errors itself and exits 2; our errors pass through.
            command.main(args=args, prog_name="envkit", standalone_mode=True)
    except KeyboardInterrupt:  # Ctrl-C: the shell's 130, as typer gives it, no traceback
        if debug:
            raise
        sys.exit(EXIT_INTERRUPTED)
    except (EnvkitError, OSError, ModuleNotFoundError) as exc:
        if debug:
            raise
        error = _as_envkit_error(exc)
        sys.exit(_report_error(error, args) if error is not None else _report_internal(exc, args))
    except Exception as exc:  # noqa: BLE001 - anything else is a bug: exit 3, never 1 ("a check failed")
        if debug:
            import traceback

            traceback.print_exc()
            sys.exit(EXIT_INTERNAL)
        sys.exit(_report_internal(exc, args))
    if code is not None:
        sys.exit(code)


def _report_internal(exc: BaseException, argv: list[str]) -> int:
    """An unexpected exception (a bug): one line on stderr naming the file that holds its traceback; exit 3."""
    from envkit.errors import InternalError

    try:
        message = _one_line(str(exc))
    except Exception:  # noqa: BLE001 - an exception whose message itself fails
        message = "(no message)"
    what = f"{type(exc).__name__}: {message}" if message else type(exc).__name__
    path: str | None = None
    try:
        path = _write_traceback(exc)
        told = f"the traceback is in {path}"
    except OSError as failed:
        told = f"the traceback could not be written ({failed.strerror or failed}); run again with --debug to see it"
    if _wants_json(argv):
        error = InternalError(
            f"internal error ({what}), please report it",
            hint="Report it with the traceback file; `envkit --debug ...` prints the traceback instead.",
            details={"exception": type(exc).__name__, "traceback_file": path},
        )
        console.emit_json({"error": error.to_dict()})
    sys.stderr.write(console.escaped(f"envkit: internal error ({what}), please report it; {told}") + "\n")
    sys.stderr.flush()
    return EXIT_INTERNAL


def _one_line(text: str, limit: int = 200) -> str:
    """An exception's message as one printable line of at most `limit` characters (it may quote untrusted input)."""
    line = "".join(c if c.isprintable() else "?" for c in text.strip().splitlines()[0]) if text.strip() else ""
    return line if len(line) <= limit else line[:limit] + "..."


def _traceback_dirs() -> list[str]:
    """Where an internal error's traceback is written, in order: $XDG_STATE_HOME/envkit (an absolute path),
    else ~/.local/state/envkit; then the temporary folder."""
    import os
    import tempfile

    state = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(state):
        state = os.path.join(os.path.expanduser("~"), ".local", "state")
    return [os.path.join(state, "envkit"), tempfile.gettempdir()]


def _write_traceback(exc: BaseException) -> str:
    """The traceback of `exc` in a new file (mode 0600, a name unique to this process, created with O_EXCL and
    O_NOFOLLOW: never through a planted link, never over a file). The state folder is used only when it is a real
    folder of this user that nobody else may write to; else the temporary folder. OSError when neither works."""
    import os
    import platform
    import secrets
    import stat
    import traceback

    text = f"envkit {__version__}, Python {platform.python_version()} on {platform.system()} {platform.machine()}\n" + "".join(
        traceback.format_exception(type(exc), exc, exc.__traceback__)
    )
    state, tmp = _traceback_dirs()
    folders = [tmp]
    try:
        os.makedirs(state, mode=0o700, exist_ok=True)
        st = os.lstat(state)
        if stat.S_ISDIR(st.st_mode) and st.st_uid == os.geteuid() and not st.st_mode & 0o022:
            folders.insert(0, state)
    except OSError:
        pass
    last: OSError = OSError("no folder to write to")
    for folder in folders:
        path = os.path.join(folder, f"envkit-traceback-{os.getpid()}-{secrets.token_hex(4)}.txt")
        try:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0), 0o600)
        except OSError as exc_open:
            last = exc_open
            continue
        with os.fdopen(fd, "w", encoding="utf-8", errors="backslashreplace") as fh:
            fh.write(text)
        return path
    raise last


# The optional extras and the projects they bring: a command that needs one says which extra to install.
_EXTRAS = {name: "smoke" for name in ("torch", "transformers", "accelerate", "safetensors", "tokenizers", "numpy")}


def _as_envkit_error(exc: BaseException) -> EnvkitError | None:
    """OS errors and a missing optional extra become exit-2 errors with what, where and what to do next; None for
    another missing module (a broken install: an internal error)."""
    from envkit.errors import CannotRun, Where

    if isinstance(exc, EnvkitError):
        return exc
    if isinstance(exc, ModuleNotFoundError):
        top = (exc.name or "").split(".")[0]
        extra = _EXTRAS.get(top)
        if extra is None:  # not an optional extra: a broken install, and a bug to report
            return None
        return CannotRun(
            f"this command needs {top}, which is not installed", hint=f"Install the {extra} extra: pip install 'envkit[{extra}]'"
        )
    assert isinstance(exc, OSError)
    path = exc.filename if isinstance(exc.filename, str) else None
    return CannotRun(
        f"{exc.strerror or exc}" + (f": {path}" if path else ""),
        where=Where(path) if path else None,
        hint="Check the path, its permissions and the free space, then run the command again.",
    )
