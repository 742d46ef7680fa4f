"""`docker run` arguments and compose for a chip's containers: the /dev/davinciN devices and driver mounts of
`envkit.export.container.DeviceFacts`, or the Ascend Docker Runtime's one variable.

The chip's facts come from the lock (`--lock`) or, for a quick look, from the matrix (`--chip`).
"""

from __future__ import annotations

from dataclasses import dataclass

from envkit.export.container import ChipDevices, ContainerFacts, DeviceFacts, device_facts


@dataclass(frozen=True)
class RunArgs:
    chip: str
    devices: list[str]
    mounts: list[tuple[str, str, str]]  # (host, container, mode)
    runtime_env: dict[str, str]  # the Ascend Docker Runtime alternative
    notes: list[str]

    def flags(self) -> list[str]:
        out = []
        for d in self.devices:
            out += ["--device", d]
        for host, ctr, mode in self.mounts:
            out += ["-v", f"{host}:{ctr}:{mode}"]
        return out

    def runtime_flags(self) -> list[str]:
        return ["--runtime", "ascend", *[x for k, v in self.runtime_env.items() for x in ("-e", f"{k}={v}")]]

    def to_json(self) -> dict:
        return {
            "chip": self.chip,
            "devices": self.devices,
            "mounts": [{"source": h, "target": c, "mode": m} for h, c, m in self.mounts],
            "flags": self.flags(),
            "ascend_docker_runtime": {"runtime": "ascend", "env": self.runtime_env, "flags": self.runtime_flags()},
            "notes": self.notes,
        }

    def compose(self) -> str:
        lines = ["# envkit image run-args --chip " + self.chip + " --format compose", "services:", "  app:", "    devices:"]
        lines += [f"      - {d}:{d}" for d in self.devices]
        lines += ["    volumes:"]
        lines += [f"      - {h}:{c}:{m}" for h, c, m in self.mounts]
        lines += [
            "# With the Ascend Docker Runtime instead of the lists above:",
            "#   runtime: ascend",
            "#   environment:",
        ]
        lines += [f"#     - {k}={v}" for k, v in self.runtime_env.items()]
        return "\n".join(lines) + "\n"


def from_facts(facts: DeviceFacts | ContainerFacts) -> RunArgs:
    """The run arguments of a container's device facts (a lock's `ContainerFacts`, or a chip's `DeviceFacts`)."""
    return RunArgs(
        chip=facts.chip,
        devices=list(facts.devices),
        mounts=list(facts.mounts),
        runtime_env={"ASCEND_VISIBLE_DEVICES": facts.visible_devices},
        notes=list(facts.notes),
    )


def run_args(chip: ChipDevices, devices: str | None) -> RunArgs:
    """The run arguments on a host of `chip` (`devices` as `--devices` takes them)."""
    return from_facts(device_facts(chip, devices))
