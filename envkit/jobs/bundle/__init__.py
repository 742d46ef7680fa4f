"""Air-gapped bundles (`envkit bundle build | verify`; the artifact is "a bundle", its data folder airgap/).

- `plan`: every entry of a bundle and its manifest, decided from the lock alone (`plan_bundle` -> `BundlePlan`);
- `archive`: a plan written as a folder or a byte-identical archive, and the records that keep an unchanged one;
- `verify`: a folder or an archive checked against its manifest, nothing extracted;
- `build`: the whole `bundle build` workflow as one call, `build(BuildRequest(...), on_progress) -> BuildResult`.

The paths inside a bundle are `envkit.artifacts.wheels.BundleLayout`'s, shared with `envkit.jobs.provision`. The plan's names
(and envkit's own wheel, `envkit.artifacts.own_wheel`, which the image job builds too) are imported on first use: `build`'s
up-to-date check and `verify` do without the models.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from envkit.jobs.bundle.archive import ARCHIVES, archive_key, is_archive, write_dir, write_tar
from envkit.jobs.bundle.build import BuildRequest, BuildResult, build, build_image, controller_closure
from envkit.jobs.bundle.verify import MANIFEST, VerifyReport, check_members, verify

if TYPE_CHECKING:
    from envkit.artifacts.own_wheel import envkit_wheel
    from envkit.jobs.bundle.plan import IMAGE_DIR, BundlePlan, Entry, ImageContext, image_tag, manifest_bytes, plan_bundle

_LAZY = {
    "BundlePlan": "plan",
    "Entry": "plan",
    "ImageContext": "plan",
    "IMAGE_DIR": "plan",
    "image_tag": "plan",
    "manifest_bytes": "plan",
    "plan_bundle": "plan",
    "envkit_wheel": "envkit.artifacts.own_wheel",
}

__all__ = [
    "ARCHIVES",
    "IMAGE_DIR",
    "MANIFEST",
    "BuildRequest",
    "BuildResult",
    "BundlePlan",
    "Entry",
    "ImageContext",
    "VerifyReport",
    "archive_key",
    "build",
    "build_image",
    "check_members",
    "controller_closure",
    "envkit_wheel",
    "image_tag",
    "is_archive",
    "manifest_bytes",
    "plan_bundle",
    "verify",
    "write_dir",
    "write_tar",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(module if "." in module else f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
