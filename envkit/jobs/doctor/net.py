"""`envkit doctor --net`: the report's net section from the fleet layer's checks of hccn_tool's answers."""

from __future__ import annotations

from typing import TYPE_CHECKING

from envkit.fleet.hccn import NetProbe, check_net, finding_dict

if TYPE_CHECKING:
    from envkit.jobs.doctor.report import NetSection


def net_section(
    net: NetProbe, chip: str | None, peers: list[str] | dict[int, list[str]] | None, log_text: str | None = None
) -> NetSection:
    """The report's `net` section: the findings of `check_net`, the peers asked, the EI codes of a log."""
    from envkit.jobs.doctor.report import NetFinding, NetSection

    codes = []
    if log_text is not None:
        from envkit.fleet.eicodes import find_codes

        codes = [c.to_dict() for c in find_codes(log_text)]
    return NetSection(
        tool=net.tool,
        devices=sorted(net.outputs),
        peers={str(d): sorted(p) for d, p in sorted(net.pings.items()) if p},
        findings=[NetFinding(**finding_dict(f)) for f in check_net(net, chip)],
        codes=codes,
    )
