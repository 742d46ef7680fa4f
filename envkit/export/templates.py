"""Text from templates: the one Jinja environment, and the build context of `envkit image render`."""

from __future__ import annotations

import functools
import json
import re
from pathlib import Path
from typing import Any

from envkit.errors import BadInput
from envkit.io.bounded import IMAGE_REF
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
    env.filters["dkey"] = _docker_key
    env.filters["djson"] = _docker_json_path
    env.filters["dref"] = _docker_ref
    env.filters["line"] = _one_line
    return env


# Every value from a lock or a bundle goes through one of these filters: each quotes for its language, and
# refuses (exit 2) what that language cannot hold quoted (a newline in a Dockerfile line, a `$` in a COPY path).
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_KEY = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9._-]{0,127}$")
_PATH = re.compile(r"^[A-Za-z0-9._+~-]+(/[A-Za-z0-9._+~-]+)*/?$")
_REF = IMAGE_REF  # an image reference: registry/name:tag@sha256:hex


def _refuse(value: str, what: str) -> BadInput:
    return BadInput(
        f"{value!r} cannot be written into {what} safely",
        hint="The value comes from the lock or the bundle: check it with `envkit validate`.",
    )


def _one_line(value: Any) -> str:
    """Text for a comment line: control characters (a newline would end the comment) written as escapes."""
    return _CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}", str(value))


def _shell_quote(value: Any) -> str:
    """One POSIX sh word (a RUN line, install.sh): single-quoted unless plainly safe; no control characters
    (a newline would end a Dockerfile instruction)."""
    import shlex

    text = str(value)
    if _CONTROL.search(text):
        raise _refuse(text, "a shell command line")
    return shlex.quote(text)


def _docker_quote(value: Any) -> str:
    """A double-quoted value for ENV and LABEL lines: `\\`, `"` and `$` escaped (Docker expands `$VAR` and
    `${VAR}` in ENV and LABEL values, even in double quotes); a control character is refused (no escape
    can hold a newline in a Dockerfile line)."""
    text = str(value)
    if _CONTROL.search(text):
        raise _refuse(text, "a Dockerfile ENV/LABEL value")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("$", "\\$") + '"'


def _docker_key(value: Any) -> str:
    """An ENV or LABEL key: plain characters only (keys cannot be quoted in every Docker version)."""
    text = str(value)
    if not _KEY.fullmatch(text):
        raise _refuse(text, "a Dockerfile ENV/LABEL key")
    return text


def _docker_ref(value: Any) -> str:
    """The image a FROM names: a reference's characters only (FROM expands `$ARG`, nothing can be quoted)."""
    text = str(value)
    if not _REF.fullmatch(text):
        raise _refuse(text, "a Dockerfile FROM line")
    return text


def _docker_json_path(value: Any) -> str:
    """A relative path in a JSON-form COPY: plain segments only, no `..` (Docker expands `$` and globs in
    COPY sources even in JSON form, so nothing that needs escaping is accepted)."""
    text = str(value)
    if not _PATH.fullmatch(text) or ".." in text.split("/"):
        raise _refuse(text, "a Dockerfile COPY path")
    return json.dumps(text)


def render(name: str, **context: Any) -> str:
    return environment().get_template(name).render(**context)


def dockerfile(plan: Any, requirements: dict[str, str] | None = None) -> str:
    """The Dockerfile; `requirements`: `requirements_files(plan)` when the caller has it already."""
    import hashlib

    from envkit.export.container import LOCK_IN_IMAGE, SERVING_ENTRYPOINT, VENV

    # each `pip install` names the sha256 of the requirements file it reads through its bind mount: checked in the
    # build, and part of the instruction, so of the engine's layer cache key (Buildah's key holds the instruction,
    # not the files a bind mount shows; the file's hashes pin every wheel it installs)
    files = requirements if requirements is not None else requirements_files(plan)
    digests = {rel.split("/")[1]: hashlib.sha256(text.encode()).hexdigest() for rel, text in files.items()}
    return render(
        "Dockerfile.j2",
        plan=plan,
        venv=VENV,
        lock_path=LOCK_IN_IMAGE,
        serving_entrypoint=json.dumps(list(SERVING_ENTRYPOINT)),  # the exec form
        requirements_sha256=digests,
    )


def requirements_files(plan: Any) -> dict[str, str]:
    """The hashed requirements of each Python layer, by path inside the context."""
    files = {
        "python/torch/requirements.txt": render(
            "requirements.txt.j2", plan=plan, reqs=plan.heavy_requirements, title="The first layer (torch, torch_npu)"
        ),
        "python/rest/requirements.txt": render(
            "requirements.txt.j2", plan=plan, reqs=plan.rest_requirements, title="The second layer (every other pin)"
        ),
    }
    if plan.serving:
        files["python/serving/requirements.txt"] = render(
            "requirements.txt.j2",
            plan=plan,
            reqs=plan.serving_requirements,
            title="The serving layer (vllm, vllm-ascend, triton-ascend, in this order)",
        )
    if plan.envkit is not None:
        files["python/envkit/requirements.txt"] = render(
            "requirements.txt.j2",
            plan=plan,
            reqs=[plan.envkit.requirement],
            title="The last layer (envkit itself)",
            origin="envkit's own wheel, built by the envkit that rendered this context (python/envkit/wheels)",
        )
    return files


def context_files(plan: Any) -> dict[str, str]:
    """The text files of the build context, by path inside it."""
    requirements = requirements_files(plan)
    return {
        "Dockerfile": dockerfile(plan, requirements),
        "envkit.lock": plan.lock_text,
        **requirements,
        ".dockerignore": render("dockerignore.j2", plan=plan),
    }


def context_inputs(plan: Any) -> list[tuple[str, Any, str | None]]:
    """The large inputs of the build context: (path inside it, the file handed in or None, or the bytes of a file
    built in memory, sha256 when known).

    The Python files go to python/torch/ (torch, torch_npu: the first, heavy layer) and python/rest/
    (every other pin), so that each layer's COPY changes only with its own pins; envkit's own wheel (bytes)
    to python/envkit/, the last layer."""
    out: list[tuple[str, Any, str | None]] = []
    for step in plan.steps:
        out.append((f"artifacts/{step.file}", step.source, step.sha256))
    for part, wheels in (("torch", plan.heavy_wheels), ("serving", plan.serving_wheels), ("rest", plan.rest_wheels)):
        for wheel in wheels:
            out.append((f"python/{part}/wheels/{Path(wheel).name}", wheel, None))
    if plan.envkit is not None:
        out.append((f"python/envkit/wheels/{plan.envkit.name}", plan.envkit.data, plan.envkit.sha256))
    return out


def write_context(plan: Any, out: Path, *, force: bool = False, inputs: tuple[Any, ...] = ()) -> list[Path]:
    """Write the build context: Dockerfile, the lock, hashed requirements, the inputs handed in and envkit's own wheel.

    Written in place (`envkit.io.outputs.claim_output`): the files of an earlier context are replaced or, when no
    longer part of it, removed; a file envkit did not write is refused (with `force`: kept, never replaced);
    every path stays under `out` (links on the way refused). An input may lie inside `out` (say `--artifacts
    OUT/artifacts`): it is never removed nor replaced (`inputs`: the files and folders named on the command line)."""
    from envkit.io.outputs import IMAGE_CONTEXT, claim_output

    large = context_inputs(plan)
    sources = [Path(source) for _rel, source, _sha in large if isinstance(source, (str, Path))]
    claim = claim_output(Path(out), IMAGE_CONTEXT, force=force, inputs=[*inputs, *sources])
    writer = claim.writer()
    for rel, text in context_files(plan).items():
        writer.text(rel, text)
    for rel, source, _sha in large:
        if isinstance(source, bytes):  # envkit's own wheel, built in memory
            writer.bytes(rel, source)
        elif source is not None:
            writer.copy(rel, Path(source))
    return writer.commit()
