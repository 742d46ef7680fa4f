"""The base of the plain records (envkit/core/matrix_records.py, envkit/lock/records.py, generated from the pydantic
models by tools/matrix_records.py): frozen, compared field by field, with `replace`, `asdict` and `fields`.

The generated classes spell out their `__slots__` and `__init__` rather than being built by `@dataclass` at import:
defining some fifty dataclasses costs more at start-up than the whole of `import yaml`, and the records are on
`envkit resolve`'s start-up path.
"""

from __future__ import annotations

from typing import Any, ClassVar, TypeVar

_R = TypeVar("_R", bound="Record")


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


def fields(record: Record | type[Record]) -> tuple[str, ...]:
    """The field names of a record (or record class), in order."""
    return record._fields


def replace(record: _R, **changes: Any) -> _R:
    """A copy of `record` with some fields changed (TypeError for a name that is not a field)."""
    unknown = set(changes) - set(record._fields)
    if unknown:
        raise TypeError(f"{type(record).__name__} has no field {', '.join(sorted(unknown))}")
    return type(record)(**{f: changes[f] if f in changes else getattr(record, f) for f in record._fields})


def asdict(value: Any) -> Any:
    """A record (and the records, lists and dicts it holds) as plain data."""
    if isinstance(value, Record):
        return {f: asdict(getattr(value, f)) for f in value._fields}
    if isinstance(value, dict):
        return {k: asdict(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [asdict(v) for v in value]
    return value
