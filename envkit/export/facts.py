"""The container facts of a lock: devices, mounts, environment, image tag and device-plugin resource, derived from the
lock alone. Every runtime envkit renders for the lock's containers reads this one model."""

from __future__ import annotations

from dataclasses import dataclass

from envkit.export.image import default_tag, plan_env
from envkit.export.runargs import chip_from_lock, run_args
from envkit.models.lock import Lock


@dataclass(frozen=True)
class ContainerFacts:
    """What a container of the lock's stack needs, from the lock alone: the one model every rendered runtime reads
    (`image run-args` flags and compose, the image's environment, and the Kubernetes manifests of `envkit k8s render`)."""

    chip: str
    image_tag: str
    devices: tuple[str, ...]  # /dev/davinciN and the driver's manager devices
    mounts: tuple[tuple[str, str, str], ...]  # (host, container, mode), sorted by the container path
    environment: tuple[tuple[str, str], ...]  # the image's environment (CANN's set_env.sh, driver paths, the venv)
    visible_devices: str  # ASCEND_VISIBLE_DEVICES as the Ascend Docker Runtime and the device plugin take it
    device_count: int
    device_plugin_resource: str | None  # the Kubernetes extended resource (null: no device plugin name is sourced)
    notes: tuple[str, ...]


def container_facts(lock: Lock, devices: str | None = None, variant: str = "base") -> ContainerFacts:
    """The container facts of `lock` (`devices` as `--devices` takes them: a subset of the host's /dev/davinciN)."""
    ra = run_args(chip_from_lock(lock), devices)
    count = sum(1 for d in ra.devices if d.removeprefix("/dev/davinci").isdigit())
    return ContainerFacts(
        chip=lock.stack.chip,
        image_tag=default_tag(lock, variant),
        devices=tuple(ra.devices),
        mounts=tuple(ra.mounts),
        environment=tuple(plan_env(lock, lock.stack.arch)),
        visible_devices=ra.runtime_env["ASCEND_VISIBLE_DEVICES"],
        device_count=count,
        device_plugin_resource=lock.platform.device_plugin_resource,
        notes=tuple(ra.notes),
    )
