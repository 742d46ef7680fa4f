"""`envkit resolve` and `envkit validate`: the typer commands. Their bodies are `envkit.cli.stack_body`'s, which the
start-up path (`envkit.cli.fast`, no typer) calls too, with what its parser, generated from these commands, read."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit.cli.examples import example
from envkit.cli.options import JsonOpt
from envkit.cli.stack_body import PIN_OPTIONS, resolve, run_resolve, run_validate, validate
from envkit.models.stackkeys import pin_flag

_PIN_HELP = dict(PIN_OPTIONS)


def _pin(key: str):  # noqa: ANN202 - a typer.Option
    """The option of the stack pin `key` (`--torch-npu` for torch_npu)."""
    return typer.Option(pin_flag(key), help=_PIN_HELP[key])


def _exit(code: int) -> None:
    if code:
        raise typer.Exit(code)


def resolve_cmd(
    file: Annotated[Optional[Path], typer.Option("-f", "--file", help="Stack file (YAML) with the keys to pin.")] = None,
    chip: Annotated[Optional[str], _pin("chip")] = None,
    arch: Annotated[Optional[str], _pin("arch")] = None,
    os: Annotated[Optional[str], _pin("os")] = None,
    python: Annotated[Optional[str], _pin("python")] = None,
    driver: Annotated[Optional[str], _pin("driver")] = None,
    firmware: Annotated[Optional[str], _pin("firmware")] = None,
    cann: Annotated[Optional[str], _pin("cann")] = None,
    torch: Annotated[Optional[str], _pin("torch")] = None,
    torch_npu: Annotated[Optional[str], _pin("torch_npu")] = None,
    numpy: Annotated[Optional[str], _pin("numpy")] = None,
    transformers: Annotated[Optional[str], _pin("transformers")] = None,
    accelerate: Annotated[Optional[str], _pin("accelerate")] = None,
    vllm: Annotated[Optional[str], _pin("vllm")] = None,
    vllm_ascend: Annotated[Optional[str], _pin("vllm_ascend")] = None,
    triton_ascend: Annotated[Optional[str], _pin("triton_ascend")] = None,
    mindspeed: Annotated[Optional[str], _pin("mindspeed")] = None,
    ray: Annotated[Optional[str], _pin("ray")] = None,
    output: Annotated[Path, typer.Option("-o", "--output", help="Where to write the lock ('-' for stdout).")] = Path(
        "envkit.lock"
    ),
    workload: Annotated[
        Optional[str],
        typer.Option(
            "--workload",
            help="Complete the frameworks of a workload: serving (vllm-ascend, vLLM, triton-ascend), serving-multi-node "
            "(the same and the Ray its vllm-ascend serves across nodes with: `envkit k8s render --node-count N`) or "
            "training-mindspeed (MindSpeed).",
        ),
    ] = None,
    json_out: JsonOpt = False,
) -> None:
    _exit(
        run_resolve(
            file=file,
            output=output,
            json_out=json_out,
            workload=workload,
            chip=chip,
            arch=arch,
            os=os,
            python=python,
            driver=driver,
            firmware=firmware,
            cann=cann,
            torch=torch,
            torch_npu=torch_npu,
            numpy=numpy,
            transformers=transformers,
            accelerate=accelerate,
            vllm=vllm,
            vllm_ascend=vllm_ascend,
            triton_ascend=triton_ascend,
            mindspeed=mindspeed,
            ray=ray,
        )
    )


resolve_cmd.__doc__ = resolve.__doc__


def validate_cmd(
    file: Annotated[Path, typer.Argument(help="A stack file or a lock.")],
    json_out: JsonOpt = False,
) -> None:
    _exit(run_validate(file=file, json_out=json_out))


validate_cmd.__doc__ = validate.__doc__


def register(app: typer.Typer) -> None:
    app.command(
        "resolve",
        epilog=example("envkit resolve --chip a3 --cann 8.5.0 -o a3.lock", "envkit resolve -f stack.yaml --python 3.10"),
    )(resolve_cmd)
    app.command("validate", epilog=example("envkit validate envkit.lock", "envkit validate stack.yaml --json"))(validate_cmd)
