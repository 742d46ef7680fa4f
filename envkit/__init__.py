"""envkit: reproducible, offline-installable, provably working Ascend NPU PyTorch stacks."""

import sys as _sys

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (mypy reads the name)
if TYPE_CHECKING:
    from importlib.machinery import ModuleSpec
    from types import ModuleType


__version__ = "0.1.0"

# Deprecated module paths, kept for one release: `import envkit.lockfile` gives envkit.lock.file and `envkit.locking`
# envkit.core.derive, with a DeprecationWarning. The finder sits at the end of sys.meta_path, so it is asked only for
# a name no other finder has: it costs nothing on any other import (nor on start-up: no import here).
_MOVED = {"envkit.lockfile": "envkit.lock.file", "envkit.locking": "envkit.core.derive"}


class _MovedModules:
    """The meta-path finder and loader of the deprecated names: the module is the new one (sys.modules holds it
    under both names; its own __spec__ is untouched)."""

    def find_spec(self, name: str, path: object = None, target: object = None) -> "ModuleSpec | None":
        if name not in _MOVED:
            return None
        from importlib.machinery import ModuleSpec

        return ModuleSpec(name, self)  # type: ignore[arg-type]  # a Loader by its two methods (importlib.abc is not loaded)

    def create_module(self, spec: "ModuleSpec") -> None:
        return None  # the default module, replaced in exec_module

    def exec_module(self, module: "ModuleType") -> None:
        import importlib
        import warnings

        new = _MOVED[module.__name__]
        warnings.warn(f"{module.__name__} is deprecated: import {new}", DeprecationWarning, stacklevel=2)
        _sys.modules[module.__name__] = importlib.import_module(new)


_sys.meta_path.append(_MovedModules())
