"""The bundle manifest (manifest.json): every file with its sha256 and size, and the lock it came from."""

from typing import Any, Literal

from pydantic import Field

from envkit.models.base import StrictModel


class BundleFile(StrictModel):
    path: str = Field(description="POSIX path relative to the bundle root")
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")
    size: int = Field(ge=0)


class TrustedArtifact(StrictModel):
    """A vendor file the lock had no hash for; its hash was recorded on first use (--trust-artifacts)."""

    file: str
    sha256: str = Field(pattern=r"^[0-9a-f]{64}$")


class BundleManifest(StrictModel):
    schema_version: Literal[1] = 1
    envkit_version: str
    lock_sha256: str = Field(pattern=r"^[0-9a-f]{64}$", description="sha256 of envkit.lock in the bundle")
    target: dict[str, str] = Field(description="python, arch, glibc, platform of the target wheels")
    controller: dict[str, str] = Field(description="python, arch, glibc, platform of the controller wheels")
    lacks: list[str] = Field(description="what the bundle does not hold, said plainly")
    trusted_on_first_use: list[TrustedArtifact] = []
    files: list[BundleFile] = Field(description="every file but manifest.json, sorted by path")
    sha256sums: str | None = Field(
        None,
        pattern=r"^[0-9a-f]{64}$",
        description="sha256 of SHA256SUMS (every file but it and manifest.json): "
        "install.sh checks the files with sha256sum against it",
    )
    lock: dict[str, Any] = Field(description="the lock, as data")
