"""The `Example:` block at the end of every command's --help (typer's `epilog`, printed after the options).

`tests/core/test_cli_help.py` walks the command tree: every command and group shows one, and each example parses with
the options of the command it names, so an example cannot name an option that is gone.
"""

from __future__ import annotations


def example(*commands: str) -> str:
    """The epilog: an `Example:` line, then one command per line. Click rewraps a paragraph unless it starts with
    the `\\b` marker, which keeps the lines as written."""
    return "\b\nExample:\n" + "\n".join(f"  {c}" for c in commands)
