"""Text from templates: the one Jinja environment, and the build context of `envkit image render`."""

from __future__ import annotations

import functools
import shutil
from pathlib import Path
from typing import Any

from envkit.fsutil import atomic_write_text, link_or_copy
from envkit.resources import data_dir


@functools.lru_cache(maxsize=1)
def environment() -> Any:
    import jinja2

    env = jinja2.Environment(
        # one template syntax for every data folder that holds templates: the image's and the bundle's
        loader=jinja2.FileSystemLoader([str(data_dir("images")), str(data_dir("airgap"))]),
        undefined=jinja2.StrictUndefined,
        keep_trailing_newline=True,
        trim_blocks=True,
        lstrip_blocks=True,
        autoescape=False,
    )
    env.filters["shq"] = _shell_quote
    env.filters["dq"] = _docker_quote
    return env


def _shell_quote(value: str) -> str:
    import shlex

    return shlex.quote(str(value))


def _docker_quote(value: str) -> str:
    """A double-quoted value for ENV and LABEL lines."""
    return '"' + str(value).replace("\\", "\\\\").replace('"', '\\"') + '"'


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def dockerfile(plan: Any) -> str:
    from envkit.image import LOCK_IN_IMAGE, VENV

    return render("Dockerfile.j2", plan=plan, venv=VENV, lock_path=LOCK_IN_IMAGE)


def context_files(plan: Any) -> dict[str, str]:
    """The text files of the build context, by path inside it."""
    return {
        "Dockerfile": dockerfile(plan),
        "envkit.lock": plan.lock_text,
        "python/torch/requirements.txt": render(
            "requirements.txt.j2", plan=plan, reqs=plan.heavy_requirements, title="The first layer (torch, torch_npu)"
        ),
        "python/rest/requirements.txt": render(
            "requirements.txt.j2", plan=plan, reqs=plan.rest_requirements, title="The second layer (every other pin)"
        ),
        ".dockerignore": render("dockerignore.j2", plan=plan),
    }


def context_inputs(plan: Any) -> list[tuple[str, Any, str | None]]:
    """The large inputs of the build context: (path inside it, the file handed in or None, sha256 when known).

    The Python files go to python/torch/ (torch, torch_npu: the first, heavy layer) and python/rest/
    (every other pin), so that each layer's COPY changes only with its own pins."""
    out: list[tuple[str, Any, str | None]] = []
    for step in plan.steps:
        out.append((f"artifacts/{step.file}", step.source, step.sha256))
    for part, wheels in (("torch", plan.heavy_wheels), ("rest", plan.rest_wheels)):
        for wheel in wheels:
            out.append((f"python/{part}/wheels/{Path(wheel).name}", wheel, None))
    return out


def write_context(plan: Any, out: Path) -> list[Path]:
    """Write the build context: Dockerfile, the lock, hashed requirements, and the inputs handed in."""
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    py = out / "python"
    for stale in (py / "requirements.txt", py / "wheels", py / "torch" / "wheels", py / "rest" / "wheels"):
        if stale.is_dir():
            shutil.rmtree(stale)
        elif stale.exists():
            stale.unlink()
    written = []
    for rel, text in context_files(plan).items():
        atomic_write_text(out / rel, text)
        written.append(out / rel)
    for rel, source, _sha in context_inputs(plan):
        if source is not None:
            link_or_copy(source, out / rel)
            written.append(out / rel)
    return written
