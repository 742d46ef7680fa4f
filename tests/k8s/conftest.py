from __future__ import annotations

from pathlib import Path

import pytest

from tests.launch.conftest import resolve_lock

DIGEST = "sha256:" + "0123456789abcdef" * 4
IMAGE = f"registry.local/envkit/npu@{DIGEST}"


def resolve(chip: str, out: Path, *extra: str) -> Path:
    from envkit.cli import main

    with pytest.raises(SystemExit) as exc:
        main(["-q", "resolve", "--chip", chip, "--arch", "aarch64", *extra, "-o", str(out)])
    assert exc.value.code in (0, None), f"resolve --chip {chip} {extra} failed"
    return out


@pytest.fixture(scope="session")
def k8s_locks(tmp_path_factory) -> dict[str, Path]:
    """A training and a serving lock per chip: {"910b": ..., "910b-serve": ...}."""
    base = tmp_path_factory.mktemp("k8s-locks")
    out: dict[str, Path] = {}
    for chip in ("910b", "a3", "310p", "950"):
        out[chip] = resolve_lock(chip, base / f"{chip}.lock")
        # vllm-ascend's PyPI wheels are A2 builds (device_build): the vendor builds the a3, 310p and 950 images from
        # the sdist (Dockerfile.a3, .310p, .a5), so those serving locks pin an sdist-only release built for the chip
        pin = {
            "950": ("--vllm-ascend", "0.30.0rc2"),
            "a3": ("--vllm-ascend", "0.23.0.post1"),
            "310p": ("--vllm-ascend", "0.23.0.post1"),
        }.get(chip, ())
        out[f"{chip}-serve"] = resolve(chip, base / f"{chip}-serve.lock", "--workload", "serving", *pin)
        # serving across nodes: the same stack with the Ray matrices/serving.yaml pins for its vllm-ascend
        multi = resolve(chip, base / f"{chip}-serve-ray.lock", "--workload", "serving-multi-node", *pin)
        out[f"{chip}-serve-ray"] = multi
    return out
