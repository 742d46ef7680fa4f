"""The device build a vllm-ascend installation or wheel says it is: its `vllm_ascend/_build_info.py`, read as data.

vllm-ascend's build writes that module (``__device_type__ = 'A2'`` from 0.12, ``__soc_version__ = 'ASCEND910B1'``
before) and its worker checks the NPU against it at start. `envkit matrix refresh` reads it from each release's
first wheel, `envkit doctor` from the installed package; both parse it here, with `ast`: only string literals of
plain top-level assignments are taken, nothing is imported or run, and the text is capped first.
"""

from __future__ import annotations

import ast
import re

from envkit.errors import BadInput

BUILD_INFO = "vllm_ascend/_build_info.py"  # the module a vllm-ascend build writes its device into
BUILD_INFO_MAX = 64 << 10  # characters (and bytes) read of it
_BUILD_VALUE = re.compile(r"[A-Za-z0-9_-]{1,32}")
_KEYS = {"__device_type__": "device_type", "__soc_version__": "soc_version"}


def build_facts(text: str, where: str) -> dict[str, str | None]:
    """``__device_type__`` and ``__soc_version__`` of a `_build_info.py`, read as data (`ast`, string literals of
    plain assignments; nothing is run): BadInput when the text is too long or not Python, or a value is not a short
    plain name."""
    out: dict[str, str | None] = {"device_type": None, "soc_version": None}
    if len(text) > BUILD_INFO_MAX:
        raise BadInput(f"{where}: {BUILD_INFO} is {len(text)} characters (at most {BUILD_INFO_MAX} are read)")
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError) as exc:
        raise BadInput(f"{where}: {BUILD_INFO} is not Python: {exc}") from None
    except RecursionError:
        raise BadInput(f"{where}: {BUILD_INFO} nests too deeply to be read") from None
    for node in tree.body:
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name)):
            continue
        key = _KEYS.get(node.targets[0].id)
        if key is None:
            continue
        value = node.value.value if isinstance(node.value, ast.Constant) else None
        if not (isinstance(value, str) and _BUILD_VALUE.fullmatch(value)):
            raise BadInput(f"{where}: {BUILD_INFO} {node.targets[0].id} is not a plain name")
        out[key] = value
    return out
