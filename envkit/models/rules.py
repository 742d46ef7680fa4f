"""The lock models' own rules, as plain functions: no pydantic here.

The pydantic models (`envkit.models.safe`, `envkit.models.lock`) attach these as their validators, and the lock's
plain-record reader (`envkit.lock.read`, driven by the table `tools/matrix_records.py` generates from the very same
models into `envkit/lock/records.py`) calls the same functions, so that a rule has one definition. A field rule
takes the value and returns it (ValueError: refused); a model rule takes the validated object (a model, or its
plain record: the same attributes) and returns it.
"""

from __future__ import annotations

import fnmatch
import re
from typing import Any, TypeVar

_T = TypeVar("_T")

# The projects envkit builds from their sdist, with the vendor's build settings (vLLM for Ascend: vllm-ascend's
# installation guide and Dockerfiles build it with VLLM_TARGET_DEVICE=empty), the fixed time of the wheel's members and
# the command. A lock's `built` package must name exactly these: building runs the sdist's own code
# (`envkit.artifacts.sdist`), so nothing a lock says chooses what is built or how.
SDIST_BUILDS: dict[str, dict[str, str]] = {"vllm": {"VLLM_TARGET_DEVICE": "empty"}}
SOURCE_DATE_EPOCH = "315532800"  # 1980-01-01, the zip epoch: the wheel's members get one fixed time
SDIST_BUILD_COMMAND = "pip wheel --no-build-isolation --no-deps"


def sdist_build_settings(name: str) -> dict[str, str]:
    """The environment envkit builds project `name` (normalized) with; KeyError when envkit builds no such project."""
    return {**SDIST_BUILDS[name], "SOURCE_DATE_EPOCH": SOURCE_DATE_EPOCH}


# --- field rules ------------------------------------------------------------------------------
def no_template(value: str) -> str:
    """One line of text carries no template markup (a job pastes it into Jinja)."""
    if any(mark in value for mark in ("{{", "{%", "{#")):
        raise ValueError("template markup ({{ }}, {% %}, {# #}) is not allowed in data")
    return value


def https_only(value: str) -> str:
    """A vendor download is https only."""
    if not value.startswith("https://"):
        raise ValueError(f"{value[:80]!r} is not an https URL (a vendor download is https only)")
    return value


def mirror_prefix(value: str) -> str:
    """A mirror is an http:// origin or a file:// folder, written with its closing `/` (so that
    `http://127.0.0.1:80/` does not cover `http://127.0.0.1:8000/`)."""
    if not value.startswith(("http://", "file:///")) or not value.endswith("/") or value.count("/") < 3:
        raise ValueError(f"mirror {value[:80]!r} is not an http:// origin or a file:/// folder ending in /")
    from envkit.io.urlpath import decoded_path

    try:
        decoded_path(value)
    except ValueError as exc:
        raise ValueError(f"mirror {value[:80]!r} is refused: {exc}") from None
    return value


def is_mirrored(url: str, mirrors: list[str]) -> bool:
    """Whether `url` may be fetched: https, or http/file under a mirror prefix the user asked for, its path decoded
    as a server or the file system decodes it (no `..`, `..%2f`, `%2e%2e`, `%252e%252e%252f`, backslash or NUL that
    could climb out of it: `envkit.io.urlpath`)."""
    return mirror_refusal(url, mirrors) is None


def mirror_refusal(url: str, mirrors: list[str]) -> str | None:
    """Why `url` may not be fetched (None: it may): see `is_mirrored`."""
    if url.startswith("https://"):
        return None
    from envkit.io.urlpath import under

    try:
        if any(under(url, m) for m in mirrors):
            return None
    except ValueError as exc:
        return f"is refused: {exc}"
    return "is neither https nor under a mirror the closure records"


# --- model rules ------------------------------------------------------------------------------
def artifact_names_match(self: _T) -> _T:
    """An installer's `.run` file matches its pattern, and its zip edition is a `.zip`."""
    a: Any = self
    if a.run.file is not None and not fnmatch.fnmatchcase(a.run.file, a.run.pattern):
        raise ValueError(f"run.file {a.run.file!r} does not match its pattern {a.run.pattern!r}")
    if a.zip is not None and not a.zip.file.endswith(".zip"):
        raise ValueError(f"zip.file {a.zip.file!r} is not a .zip")
    return self


def file_is_the_package(self: _T) -> _T:
    """The file must be a wheel or sdist of this very project (no other file can hide behind a name)."""
    p: Any = self
    stem = p.filename.lower()
    if not (stem.endswith(".whl") or stem.endswith(".tar.gz") or stem.endswith(".zip")):
        raise ValueError(f"filename {p.filename!r} is not a wheel or an sdist")
    project = re.sub(r"[-_.]+", "-", p.filename.split("-", 1)[0]).lower()
    if project != p.name:
        raise ValueError(f"filename {p.filename!r} is not a file of {p.name!r}")
    return self


def built_the_known_way(self: _T) -> _T:
    """A package recorded as built from its sdist is one envkit knows how to build (`SDIST_BUILDS`), with exactly its
    settings and command, from an sdist of this very project and version at the package's `url`: a lock cannot make
    envkit build another project, or build with settings (an environment) of its own choosing."""
    p: Any = self
    b = p.built
    if b is None:
        return self
    if p.name not in SDIST_BUILDS:
        known = ", ".join(sorted(SDIST_BUILDS))
        raise ValueError(f"built: envkit builds only {known} from an sdist, not {p.name!r} (its wheel comes from an index)")
    if dict(b.env) != sdist_build_settings(p.name):
        raise ValueError(f"built.env {dict(b.env)!r} is not envkit's build of {p.name} ({sdist_build_settings(p.name)!r})")
    if b.command != SDIST_BUILD_COMMAND:
        raise ValueError(f"built.command {b.command[:80]!r} is not envkit's ({SDIST_BUILD_COMMAND!r})")
    stem = re.sub(r"(\.tar\.gz|\.zip)$", "", b.sdist)
    if stem == b.sdist or "-" not in stem:
        raise ValueError(f"built.sdist {b.sdist!r} is not an sdist file name (NAME-VERSION.tar.gz)")
    project, _, version = stem.rpartition("-")
    if re.sub(r"[-_.]+", "-", project).lower() != p.name or version != p.version.split("+", 1)[0]:
        raise ValueError(f"built.sdist {b.sdist!r} is not the sdist of {p.name} {p.version.split('+', 1)[0]}")
    if p.url.rsplit("/", 1)[-1] != b.sdist:
        raise ValueError(f"url {p.url[:120]!r} is not the sdist's ({b.sdist!r})")
    return self


def urls_follow_the_policy(self: _T) -> _T:
    """https, or http/file under a recorded mirror: an edited URL cannot point at a plain-text host or a local
    file nobody asked for."""
    c: Any = self
    urls = [("index_url", c.index_url)] + [("extra_index_urls", u) for u in c.extra_index_urls]
    urls += [("find_links", u) for u in c.find_links if "://" in u]
    urls += [(f"packages.{p.name}.url", p.url) for p in c.packages]
    for where, url in urls:
        refusal = mirror_refusal(url, c.mirrors)
        if refusal is not None:
            raise ValueError(
                f"{where}: {url[:120]!r} {refusal} "
                f"(mirrors: {', '.join(c.mirrors) or 'none'}); http: and file: sources must be "
                "given to `envkit lock` explicitly (--index-url, --extra-index-url, --find-links, "
                "--torch-index-url)"
            )
    return self
