"""Every command's --help ends with an `Example:` block, and every example parses as the command it is shown for;
so does every `envkit` command the README and docs/ show.

The command tree is walked (typer's click tree, groups included), so a command added without an example fails here,
and so does an example or a documented command that names an option or a subcommand that does not exist (any more).
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import pytest


def _tree():
    import typer.main

    from envkit.cli import build_app

    return typer.main.get_command(build_app())


def _walk(cmd, path: tuple[str, ...] = ()):
    yield path, cmd
    for name in sorted(getattr(cmd, "commands", None) or {}):
        yield from _walk(cmd.commands[name], (*path, name))


PATHS = [path for path, _ in _walk(_tree())]


def _examples(help_text: str) -> list[str]:
    """The lines of the `Example:` block (indented under it, up to the first blank line)."""
    lines = help_text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip() == "Example:"]
    assert starts, "no `Example:` line in:\n" + help_text
    out = []
    for line in lines[starts[-1] + 1 :]:
        if not line.strip():
            break
        out.append(line.strip())
    return out


def _parse(argv: list[str]) -> tuple[str, ...]:
    """The command path `envkit ARGV` resolves to, each level parsed with its own options as `envkit` would (an
    unknown option, a missing required one or a bad value raises click's UsageError); nothing is run."""
    root = _tree()
    cmd, ctx, path = root, root.make_context("envkit", list(argv)), []
    while getattr(cmd, "commands", None):
        name, sub, rest = cmd.resolve_command(ctx, [*ctx._protected_args, *ctx.args])
        path.append(name)
        cmd, ctx = sub, sub.make_context(name, rest, parent=ctx)
    return tuple(path)


def test_the_walk_reaches_every_command_and_group():
    from envkit.cli import COMMANDS

    assert {p[0] for p in PATHS if p} == set(COMMANDS)
    assert {("image", "render"), ("bundle", "verify"), ("launch", "node"), ("matrix", "schema")} <= set(PATHS)


@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "envkit")
def test_every_help_shows_an_example_that_parses_as_that_command(path, run_cli):
    r = run_cli(*path, "--help")
    assert r.code == 0, r.err
    examples = _examples(r.out)
    assert examples, r.out
    is_group = bool(getattr(dict(_walk(_tree()))[path], "commands", None))
    for line in examples:
        words = shlex.split(line)
        assert words[0] == "envkit", line
        got = _parse(words[1:])
        # a command's example runs that command; a group's (and the root's) one of the commands under it
        assert got[: len(path)] == path and (is_group or got == path), (line, got)


def test_the_check_refuses_an_example_with_an_option_that_does_not_exist():
    from typer._click.exceptions import UsageError

    assert _parse(["image", "render", "--lock", "envkit.lock", "-o", "image/"]) == ("image", "render")
    with pytest.raises(UsageError, match="No such option"):
        _parse(["image", "render", "--no-such-option"])
    with pytest.raises(UsageError, match="No such command"):
        _parse(["image", "rendr"])
    with pytest.raises(UsageError, match="Missing parameter: lock"):
        _parse(["launch", "render", "-i", "hosts.ini"])


ROOT = Path(__file__).resolve().parents[2]
DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "airgap" / "README.md"]


def _documented_commands() -> list[tuple[str, str]]:
    """(file, line) of every `envkit ...` line of the ```sh blocks of the README and docs/, continuation lines joined,
    comments dropped. A line that elides its arguments (`envkit provision ... --json`: `...` outside [brackets]) is
    left out."""
    found = []
    for doc in DOCS:
        for block in re.findall(r"```sh\n(.*?)\n```", doc.read_text(), re.S):
            for raw in re.sub(r"\\\n\s*", " ", block).splitlines():
                line = raw.split("#", 1)[0].strip()
                if line.startswith("envkit ") and "..." not in re.sub(r"\[[^\[\]]*\]", "", re.sub(r"\[[^\[\]]*\]", "", line)):
                    found.append((doc.relative_to(ROOT).as_posix(), line))
    return found


DOCUMENTED = _documented_commands()


def test_the_docs_show_commands():
    assert len(DOCUMENTED) > 30 and ("README.md", "envkit lock --lock envkit.lock") in DOCUMENTED


@pytest.mark.parametrize("where, line", DOCUMENTED, ids=[f"{w}: {line[:60]}" for w, line in DOCUMENTED])
def test_every_documented_command_parses(where, line):
    """Each command the README and docs/ show (its optional [--options] included, placeholders such as N given a
    value of their type) names a command and options envkit has."""
    words = [{"N": "2"}.get(w, w) for w in shlex.split(line.replace("[", " ").replace("]", " ")) if w not in ("...", "…")]
    assert _parse(words[1:]), line
