"""The base of the plain records: frozen, compared field by field, with `replace`, `asdict` and `fields`; and `build`,
which makes the record classes of the matrix, the lock and the report from the tables tools/matrix_records.py
derives from their pydantic models (envkit/models/tables.py: each record's fields in order, defaults, and the
mixin that holds its methods, envkit/models/methods.py).

A record class is made with `type()` and one generic `__init__` rather than by `@dataclass`: defining some sixty
dataclasses costs more at start-up than the whole of `import yaml` (`dataclasses` imports `inspect`), and the records
are on `envkit resolve`'s start-up path. The type checker sees each record as its pydantic model (the record modules
import the models under TYPE_CHECKING): the same fields and methods.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar, TypeVar

_R = TypeVar("_R", bound="Record")
_T = TypeVar("_T")
_REQUIRED: Any = object()


class Record:
    """A frozen record: its fields are `_fields` (in the model's order), set once by the generated `__init__`."""

    __slots__ = ()
    _fields: ClassVar[tuple[str, ...]] = ()

    def __setattr__(self, name: str, value: object) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be set (use envkit.records.replace)")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} is frozen: {name} cannot be deleted")

    def __eq__(self, other: object) -> bool:
        if type(other) is not type(self):
            return NotImplemented
        return all(getattr(self, f) == getattr(other, f) for f in self._fields)

    __hash__ = None  # type: ignore[assignment]  # fields hold lists and dicts

    def __repr__(self) -> str:
        return f"{type(self).__name__}({', '.join(f'{f}={getattr(self, f)!r}' for f in self._fields)})"

    def __reduce__(self) -> tuple[Any, ...]:  # copy and deepcopy: rebuilt through __init__
        return (_rebuild, (type(self), {f: getattr(self, f) for f in self._fields}))


class Value(Record):
    """A frozen record of hashable fields, hashed by them (what a frozen dataclass is): the small values of the
    start-up path (`Pin`, `Where`, ...), written as records because `dataclasses` imports `inspect` (with `ast`,
    `dis` and `tokenize`: 15-25 ms that every command paid at start-up)."""

    __slots__ = ()

    def __hash__(self) -> int:  # type: ignore[override]
        return hash(tuple(getattr(self, f) for f in self._fields))


def _rebuild(cls: type[_R], values: dict[str, Any]) -> _R:
    return cls(**values)


def fields(record: Any) -> tuple[str, ...]:
    """The field names of a record (or record class), in order."""
    names: tuple[str, ...] = record._fields
    return names


def replace(record: _T, **changes: Any) -> _T:
    """A copy of `record` with some fields changed (TypeError for a name that is not a field)."""
    rec: Any = record
    unknown = set(changes) - set(rec._fields)
    if unknown:
        raise TypeError(f"{type(rec).__name__} has no field {', '.join(sorted(unknown))}")
    copy: _T = type(rec)(**{f: changes[f] if f in changes else getattr(rec, f) for f in rec._fields})
    return copy


# A record's table entry (envkit/models/tables.py): its fields in order, the defaults of those that have one (a list
# or dict default is copied for each record), the mixin of its methods (None: none) and the fields its dump leaves
# out when None (`dump_drop_none`, as the model's serializer does).
Entry = tuple[tuple[str, ...], Mapping[str, Any], "str | None", tuple[str, ...]]


def _init(name: str, plan: tuple[tuple[str, Any], ...]) -> Any:
    """The keyword-only `__init__` of a record: each field from its argument or its default, in order."""
    setter = object.__setattr__

    def __init__(self: Record, **values: Any) -> None:
        for field, default in plan:
            if field in values:
                value = values.pop(field)
            elif default is _REQUIRED:
                raise TypeError(f"{name}() missing required keyword argument: {field!r}")
            else:
                value = default.copy() if type(default) in (list, dict) else default
            setter(self, field, value)
        if values:
            raise TypeError(f"{name}() got an unexpected keyword argument {next(iter(values))!r}")

    return __init__


def build(table: Mapping[str, Entry], mixins: Mapping[str, type], module: str) -> dict[str, type[Record]]:
    """The record classes of a table, by name, each with its mixin (by name in `mixins`) and `module` as its
    `__module__`."""
    out: dict[str, type[Record]] = {}
    for name, (names, defaults, mixin, drop_none) in table.items():
        plan = tuple((f, defaults.get(f, _REQUIRED)) for f in names)
        space: dict[str, Any] = {
            "__slots__": names,
            "_fields": names,
            "__init__": _init(name, plan),
            "__module__": module,
            "__qualname__": name,
            "__doc__": f"The plain record of the model {name} (envkit/models/tables.py).",
        }
        if drop_none:
            space["dump_drop_none"] = frozenset(drop_none)
        bases = (mixins[mixin], Record) if mixin else (Record,)
        out[name] = type(name, bases, space)
    return out


def asdict(value: Any) -> Any:
    """A record (and the records, lists and dicts it holds) as plain data."""
    if isinstance(value, Record):
        return {f: asdict(getattr(value, f)) for f in value._fields}
    if isinstance(value, dict):
        return {k: asdict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [asdict(v) for v in value]
    return value
