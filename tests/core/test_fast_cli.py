"""The start-up path of the fast commands is generated from their one (typer) definition: the committed table is
what the generator makes now, each body takes exactly the command's parameters, and the lean parser reads the plain
forms and hands everything else to typer."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from envkit.cli import fast
from envkit.cli._fastspec import COMMANDS
from envkit.cli.stack_body import PIN_OPTIONS
from tests.conftest import load_tool

ROOT = Path(__file__).resolve().parents[2]


def _generator():
    return load_tool("fast_cli")


def test_the_committed_table_is_what_the_generator_makes_now():
    gen = _generator()
    assert (ROOT / "envkit" / "cli" / "_fastspec.py").read_text() == gen.render(), "run `make fast-cli`"
    assert set(COMMANDS) == set(gen.BODIES)


@pytest.mark.parametrize("path", sorted(COMMANDS))
def test_each_body_takes_the_commands_parameters_by_name(path):
    spec = COMMANDS[path]
    module, function = spec["body"].split(":")
    body = getattr(importlib.import_module(module), function)
    sig = inspect.signature(body)
    named = {n for n, p in sig.parameters.items() if p.kind is inspect.Parameter.KEYWORD_ONLY}
    names = {p["name"] for p in spec["params"]}
    varkw = any(p.kind is inspect.Parameter.VAR_KEYWORD for p in sig.parameters.values())
    if path == ("resolve",):  # the pins come as **pins: exactly the PIN_OPTIONS keys
        assert varkw and names - named == {key for key, _ in PIN_OPTIONS}
    else:
        assert not varkw and names == named
    assert all(p.kind is not inspect.Parameter.POSITIONAL_OR_KEYWORD for p in sig.parameters.values())


def test_the_generator_refuses_a_shape_the_parser_cannot_read():
    gen = _generator()

    class Descriptor:
        annotation = int

    class Option:  # a typer option of a type the lean parser has no conversion for
        name, opts, secondary_opts, multiple, nargs, default, required = "jobs", ["--jobs"], [], False, 1, 8, False
        type_descriptor = Descriptor()

    with pytest.raises(SystemExit, match="--jobs"):
        gen._param(Option(), "envkit x")
    Option.type_descriptor.annotation = str
    Option.multiple = True
    with pytest.raises(SystemExit, match="multiple=True"):
        gen._param(Option(), "envkit x")


RESOLVE = COMMANDS[("resolve",)]["params"]
VALIDATE = COMMANDS[("validate",)]["params"]


def test_the_plain_forms_parse():
    got = fast.parse(RESOLVE, ["--chip", "a3", "--torch-npu=2.6.0.post5", "-o", "-", "--json"])
    assert got is not None
    assert got["chip"] == "a3" and got["torch_npu"] == "2.6.0.post5" and got["output"] == Path("-") and got["json_out"]
    assert got["file"] is None and got["python"] is None and got["workload"] is None
    defaults = fast.parse(RESOLVE, [])
    assert defaults is not None and defaults["output"] == Path("envkit.lock") and defaults["json_out"] is False
    assert fast.parse(RESOLVE, ["--chip", "a3", "--chip", "910b"])["chip"] == "910b"  # the last one, as click
    assert fast.parse(VALIDATE, ["stack.yaml", "--json"]) == {"file": Path("stack.yaml"), "json_out": True}
    assert fast.parse(VALIDATE, ["--json", "-"]) == {"file": Path("-"), "json_out": True}


@pytest.mark.parametrize(
    "params, argv",
    [
        (RESOLVE, ["--help"]),
        (RESOLVE, ["--chi", "a3"]),  # an abbreviation: click refuses it, typer says so
        (RESOLVE, ["--chip"]),  # a value missing at the end
        (RESOLVE, ["--json=yes"]),  # a flag given a value
        (RESOLVE, ["-fstack.yaml"]),  # an attached short value: typer's to read
        (RESOLVE, ["stray"]),  # a positional resolve does not take
        (RESOLVE, ["--", "--chip"]),
        (VALIDATE, []),  # the required argument missing
        (VALIDATE, ["a.yaml", "b.yaml"]),  # one positional too many
    ],
)
def test_anything_else_goes_to_typer(params, argv):
    assert fast.parse(params, argv) is None


def test_only_the_fast_commands_take_the_path():
    assert fast.is_fast(["resolve"]) and fast.is_fast(["bundle", "verify", "x"]) and fast.is_fast(["validate", "x"])
    assert not fast.is_fast(["bundle", "build"]) and not fast.is_fast(["lock"]) and not fast.is_fast([])
    assert fast.run(["matrix", "show"]) is None and fast.run(["resolve", "--help"]) is None
