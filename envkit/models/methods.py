"""The methods a model shares with its plain record, written once: each is a mixin that the pydantic model
(envkit/models/) and the record built from it (`envkit.records.build`, from the tables tools/matrix_records.py
writes) both inherit. No pydantic here: the records are on the start-up path.

A mixin holds methods and properties only (no fields, `__slots__ = ()`); the attributes it reads are declared for
the type checker alone, and the model declares them as fields.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal, Protocol, TypeVar


class _ChipRow(Protocol):
    @property
    def chip(self) -> str: ...


class _NamedRow(Protocol):
    @property
    def name(self) -> str: ...


class _CodeRow(Protocol):
    @property
    def code(self) -> str: ...


_C = TypeVar("_C", bound=_ChipRow)
_N = TypeVar("_N", bound=_NamedRow)
_E = TypeVar("_E", bound=_CodeRow)


# What each HCCL lookup reads, as protocols over the row type: a lookup on the model returns its own row model (the
# type checker infers it from the field), without this module naming the models (they import it).
class _RankTables(Protocol[_C]):
    @property
    def rank_tables(self) -> list[_C]: ...


class _Env(Protocol[_N]):
    @property
    def env(self) -> list[_N]: ...


class _OpModes(Protocol[_C]):
    @property
    def op_expansion_modes(self) -> list[_C]: ...


class _IpPlans(Protocol[_C]):
    @property
    def ip_plans(self) -> list[_C]: ...


class _ErrorCodes(Protocol[_E]):
    @property
    def error_codes(self) -> list[_E]: ...


class SourcedMethods:
    """A matrix row's sources: `source` as a list, and as one line."""

    __slots__ = ()
    if TYPE_CHECKING:
        source: str | list[str]

    @property
    def sources(self) -> list[str]:
        return [self.source] if isinstance(self.source, str) else list(self.source)

    @property
    def source_text(self) -> str:
        return "; ".join(self.sources)


class TorchNpuReleaseMethods(SourcedMethods):
    __slots__ = ()
    if TYPE_CHECKING:
        python: list[str] | None
        python_by_arch: dict[Literal["aarch64", "x86_64"], list[str]] | None

    def pythons_on(self, arch: str) -> list[str] | None:
        """The Pythons of its wheels on `arch` (`python_by_arch` where given; an arch it lacks: none), else `python`."""
        if self.python_by_arch is None:
            return self.python
        return next((tags for a, tags in self.python_by_arch.items() if a == arch), [])


class HcclDataMethods:
    """The HCCL facts by chip, variable name and error code."""

    __slots__ = ()

    def rank_table(self: _RankTables[_C], chip: str) -> _C | None:
        return next((r for r in self.rank_tables if r.chip == chip), None)

    def env_rule(self: _Env[_N], name: str) -> _N:
        return next(r for r in self.env if r.name == name)

    def op_modes(self: _OpModes[_C], chip: str) -> _C | None:
        return next((r for r in self.op_expansion_modes if r.chip == chip), None)

    def ip_plan(self: _IpPlans[_C], chip: str) -> _C | None:
        return next((r for r in self.ip_plans if r.chip == chip), None)

    def error_code(self: _ErrorCodes[_E], code: str) -> _E | None:
        return next((r for r in self.error_codes if r.code == code), None)
