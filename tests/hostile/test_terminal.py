"""The terminal rule: every text from a host, an index, a lock or a client is escaped before it reaches a terminal.
A host's version.info or npu-smi output, a request line, a file name: an ESC sequence (colour, title, cursor), a C1
CSI, a carriage return or backspace that hides what came before, a bidi override that reorders the line, each is
shown as its escape; tab and newline stay; `--json` stays valid JSON with the C1 controls escaped."""

from __future__ import annotations

import json

import pytest

from envkit import console

HOSTILE = "Version=7.5.0\x1b[2J\x1b]0;owned\x07\rok\x08\x9b31m\u202eevil\u2066\x00\x7f"
SHOWN = "Version=7.5.0\\x1b[2J\\x1b]0;owned\\x07\\x0dok\\x08\\x9b31m\\u202eevil\\u2066\\x00\\x7f"


def test_escaped_shows_every_control_and_keeps_tab_newline_and_text():
    assert console.escaped(HOSTILE) == SHOWN
    assert console.escaped("tab\there\nnext line, ünïcode, 中文") == "tab\there\nnext line, ünïcode, 中文"
    # the ends of each range
    for ch, shown in (("\x00", "\\x00"), ("\x08", "\\x08"), ("\x0b", "\\x0b"), ("\x1f", "\\x1f"), ("\x7f", "\\x7f")):
        assert console.escaped(ch) == shown
    for ch in ("\x20", "\x7e", "\xa0", "\t", "\n"):
        assert console.escaped(ch) == ch
    assert (
        console.escaped("\x9f") == "\\x9f" and console.escaped("\u202a") == "\\u202a" and console.escaped("\u2069") == "\\u2069"
    )


@pytest.fixture
def terminal(monkeypatch):
    """console.out and console.err made anew, as on a terminal (rich's own stripping on)."""
    monkeypatch.setenv("FORCE_COLOR", "1")
    monkeypatch.setattr(console, "_consoles", {})
    yield
    console._consoles.clear()


def test_what_the_console_prints_is_escaped(terminal, capsys):
    console.out.print(f"host-1  {HOSTILE}", markup=False)
    console.err.print(f"host-2  {HOSTILE}", markup=False)
    console.progress(f"host-3  {HOSTILE}")
    out, err = capsys.readouterr()
    for text in (out, err):
        assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text and "\r" not in text, repr(text)
    assert f"host-1  {SHOWN}" in out
    assert f"host-2  {SHOWN}" in err and f"host-3  {SHOWN}" in err


def test_a_json_document_escapes_the_c1_controls_and_stays_json(capsys):
    console.emit_json({"version": HOSTILE, "ok": ["\x85", "ü"]})
    out = capsys.readouterr().out
    assert "\x9b" not in out and "\x85" not in out and "\u202e" not in out and "\x1b" not in out
    assert json.loads(out) == {"version": HOSTILE, "ok": ["\x85", "ü"]}


def test_the_provision_summary_of_a_hostile_host_is_escaped(terminal, capsys):
    """A host's own text (its version.info as the smoke/doctor verdict, a warning with npu-smi's chip name, a failed
    task's message) goes through provision's progress lines and summary to the terminal, as the CLI prints them."""
    from envkit.cli.provision import _progress
    from envkit.executor.ansible import HostRow, Summary
    from envkit.jobs.provision import format_plan, format_table, format_warnings

    row = HostRow(host="node-1", ok=3, failed=1, smoke=f"failed: {HOSTILE}", doctor=HOSTILE, ran=True)
    row.warnings.append(f"npu-smi names chip {HOSTILE}")
    row.errors.append(f"version.info says {HOSTILE}")
    summary = Summary(hosts={"node-1": row}, check=True, complete=True)
    _progress({"event": "result", "status": "failed", "host": "node-1", "task": "HDK | Probe", "msg": HOSTILE})
    for lines in (format_plan(summary), format_table(summary), format_warnings(summary)):
        console.out.print("\n".join(lines), markup=False)
    out, err = capsys.readouterr()
    assert SHOWN in out and f"npu-smi names chip {SHOWN}" in out and f"version.info says {SHOWN}" in out
    assert "Version=7.5.0\\x1b[2J" in err  # the progress line (cut at its first line: the \\x0d stays on it)
    for text in (out, err):
        assert "\x1b" not in text and "\x9b" not in text and "\u202e" not in text, repr(text)


def test_a_stack_table_shows_its_cells_as_plain_escaped_text(terminal, capsys):
    """The stack table (resolve, validate) is rich's: a cell is printed as text, its markup and controls shown."""
    from envkit.cli.stack_body import render_stack

    render_stack({"chip": "910b", "python": "[bold red]3.10[/]\x1b[2J"})
    out = capsys.readouterr().out
    assert "[bold red]3.10[/]\\x1b[2J" in out and "\x1b[2J" not in out
