"""The Ansible modules envkit ships (playbooks/plugins/modules), imported from their files for the unit tests.

Each is imported once, under the dotted name of its path (`playbooks.plugins.modules.envkit_probe`): mutmut
(tools/mutation.py, group `ansible`) knows a function by its module's name and the path it mutated, so a module
imported under another name would run none of its mutants."""

from __future__ import annotations

import functools
import importlib.util
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parents[2]
FOLDER = ROOT / "playbooks" / "plugins" / "modules"


@functools.cache
def ansible_module(name: str) -> ModuleType:
    """playbooks/plugins/modules/NAME.py as a module (its decisions, checks and parsers, called directly)."""
    path = FOLDER / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"playbooks.plugins.modules.{name}", path)
    assert spec is not None and spec.loader is not None, path
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
