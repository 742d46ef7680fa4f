"""Where `envkit lock` and `envkit bundle build` build a wheel from its sdist (vLLM): this machine, or with
`--build-image IMAGE` containers of that image for the target's platform (`envkit.executor.docker.BuildContainer`)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from envkit.artifacts.closure import ClosureTarget

BuildPlace = Callable[[Path, "ClosureTarget"], Any]


def build_place(build_image: str | None) -> BuildPlace | None:
    """`--build-image IMAGE` as the place an sdist is built, given the build's folder and the target (None: this
    machine). BadInput when IMAGE is no image reference; the engine is asked for nothing until a build runs."""
    if build_image is None:
        return None
    from envkit.executor.docker import BuildContainer, Engine
    from envkit.export.image import oci_platform
    from envkit.io.bounded import image_ref

    image = image_ref(build_image, "--build-image")
    engine = Engine()
    return lambda work, target: BuildContainer(engine, image, oci_platform(target.arch), work)
