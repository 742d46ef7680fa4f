"""The shape of a collective profile (`envkit smoke --collectives`, `envkit launch node` and `launch profile`) as it
is read back: strict (no coercion: `"false"` is no bool, `1.0` no size), unknown keys refused, times finite and not
negative (`envkit.io.jsonread` has refused NaN and Infinity before). `Profile` is what `envkit compare` reads, a host's
`HostProfile` what `envkit launch profile` merges. The sections compare does not read (copies, vendor tools) are
objects of any content, within the reader's size and depth caps."""

from __future__ import annotations

from typing import Annotated, Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

Op = Literal["all_reduce", "all_gather", "reduce_scatter", "all_to_all", "all_to_allv"]
Time = Annotated[float, Field(ge=0, allow_inf_nan=False)]
Size = Annotated[int, Field(ge=1)]
Rank = Annotated[int, Field(ge=0)]
FORMAT: Final = "envkit-collectives/1"


class _Doc(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True, defer_build=True)


class RankResult(_Doc):
    """One rank's measure of one (op, size)."""

    op: Op
    size: Size
    seconds: Time
    iters: Annotated[int, Field(ge=0)]
    correct: bool


class RankRecord(_Doc):
    """One rank's results, or its error."""

    rank: Rank
    results: list[RankResult] = []
    error: str | None = None


class Row(_Doc):
    """One (op, size) of the table: the slowest rank's time, bandwidths, correct on every rank."""

    op: Op
    size: Size
    time_us: Time
    correct: bool
    algbw_gbps: Time | None = None
    busbw_gbps: Time | None = None
    per_rank_time_us: list[Time] = []


class HostEntry(_Doc):
    node_rank: Rank | None = None
    hostname: str | None = None
    ranks: list[Rank] = []


class _Common(_Doc):
    format: Literal["envkit-collectives/1"] = FORMAT
    ok: bool | None = None
    backend: str | None = None
    device_type: Literal["cpu", "cuda", "npu"] | None = None
    world: Annotated[int, Field(ge=1)]
    sizes: list[Size] = []
    ops: list[Op] = []
    bus_factors: dict[str, str] = {}
    results: list[Row] = []
    ranks: list[RankRecord] = []
    errors: list[str] = []
    copies: dict[str, Any] = {}
    vendor_tools: dict[str, Any] = {}
    nnodes: Annotated[int, Field(ge=1)] | None = None
    node_rank: Rank | None = None
    master: str | None = None
    hostname: str | None = None
    hosts: dict[str, HostEntry] = {}


class Profile(_Common):
    """A profile as `envkit compare` reads it: its format named, the table present."""

    format: Literal["envkit-collectives/1"]
    results: list[Row]


class HostProfile(_Common):
    """One host's part of a multi-host profile (`envkit launch node`), as `merge` reads it."""

    sizes: list[Size]
    ops: list[Op]
    ranks: list[RankRecord]
