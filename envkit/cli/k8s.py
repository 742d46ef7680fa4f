"""`envkit k8s render`: a kustomize base (smoke per node, training, serving) from the lock."""

from pathlib import Path
from typing import Annotated, Optional

import typer

from envkit import console
from envkit.cli.examples import example
from envkit.cli.options import ForceOpt, JsonOpt


def render(
    ctx: typer.Context,
    lock: Annotated[Path, typer.Option("--lock", help="The lock: chip, image environment, device-plugin resource.")],
    out: Annotated[Path, typer.Option("--out", "-o", help="Folder of the kustomize base (nothing is written elsewhere).")],
    image: Annotated[
        Optional[str],
        typer.Option(
            "--image", help="The image built from the lock, as the cluster pulls it: REGISTRY/NAME@sha256:DIGEST or :TAG."
        ),
    ] = None,
    node: Annotated[
        list[str], typer.Option("--node", help="A node to run on (repeat for each); renders its smoke Job and pins the pods.")
    ] = [],  # noqa: B006
    node_count: Annotated[
        Optional[int], typer.Option("--node-count", help="Nodes of the training or serving job, when no --node is named.")
    ] = None,
    namespace: Annotated[str, typer.Option("--namespace", "-n", help="The namespace of every document.")] = "default",
    engine: Annotated[
        str, typer.Option("--engine", help="Training job: ascendjob (MindCluster, default), volcano or pytorchjob (Kubeflow v1).")
    ] = "ascendjob",
    scheduler: Annotated[
        str,
        typer.Option("--scheduler", help="volcano (MindCluster; ASCEND_VISIBLE_DEVICES from the pod annotation) or default."),
    ] = "volcano",
    resource: Annotated[
        Optional[str],
        typer.Option(
            "--resource", help="Extended resource of another device plugin (default: the lock's, e.g. huawei.com/Ascend910)."
        ),
    ] = None,
    serving: Annotated[
        Optional[bool], typer.Option("--serving/--no-serving", help="Serve with vLLM Ascend (default: for a serving lock).")
    ] = None,
    npus_per_node: Annotated[
        Optional[int], typer.Option("--npus-per-node", help="NPUs each pod takes (default: every NPU of the chip's node).")
    ] = None,
    name: Annotated[Optional[str], typer.Option("--name", help="Name of the job or server (default: envkit-<chip>).")] = None,
    script: Annotated[str, typer.Option("--script", help="The training script each pod launches.")] = "train.py",
    launcher: Annotated[str, typer.Option("--launcher", help="torchrun or accelerate.")] = "torchrun",
    model: Annotated[
        Optional[str],
        typer.Option(
            "--model",
            help="Serving: the model vllm serve loads (default: the model volume's mount path, else /models/model).",
        ),
    ] = None,
    model_pvc: Annotated[
        Optional[str],
        typer.Option("--model-pvc", help="Serving: a PersistentVolumeClaim holding the model, mounted read-only."),
    ] = None,
    model_host_path: Annotated[
        Optional[str],
        typer.Option("--model-host-path", help="Serving: a directory on every node holding the model, mounted read-only."),
    ] = None,
    model_mount: Annotated[
        Optional[str],
        typer.Option("--model-mount", help="Where the model volume is mounted (default: /models/<PVC name or directory name>)."),
    ] = None,
    schedule_policy: Annotated[
        Optional[str],
        typer.Option(
            "--schedule-policy",
            help="Volcano's huawei.com/schedule_policy by hardware form (required for 950, e.g. chip8-node8-ra64-sp).",
        ),
    ] = None,
    smoke_only: Annotated[
        bool,
        typer.Option(
            "--smoke-only", help="Only the smoke Job of each --node: no training or serving (e.g. 310P nodes, one job each)."
        ),
    ] = False,
    rank_table_timeout: Annotated[
        int,
        typer.Option("--rank-table-timeout", help="Seconds a training pod waits for the operator's rank table (1 to 86400)."),
    ] = 600,
    cpu: Annotated[
        Optional[str], typer.Option("--cpu", help="CPU request of every container (default: 4 per NPU; envkit's choice).")
    ] = None,
    memory: Annotated[
        Optional[str],
        typer.Option("--memory", help="Memory request and limit of every container (default: 32Gi per NPU; envkit's choice)."),
    ] = None,
    run_as: Annotated[
        str, typer.Option("--run-as", help="UID:GID the containers run as: the image's HwHiAiUser (build args).")
    ] = "1000:1000",
    socket_ifname: Annotated[
        str,
        typer.Option(
            "--socket-ifname",
            help="Serving across nodes: the pods' network interface for GLOO/TP_SOCKET_IFNAME and HCCL_SOCKET_IFNAME "
            "(vllm-ascend's multi-node guide; eth0: the pod's interface under the usual CNIs).",
        ),
    ] = "eth0",
    ray_timeout: Annotated[
        int,
        typer.Option(
            "--ray-timeout",
            help="Serving across nodes: seconds the leader waits for its Ray nodes and each worker retries joining it.",
        ),
    ] = 600,
    accelerator_type: Annotated[
        Optional[str], typer.Option("--accelerator-type", help="The accelerator-type node label (default: the chip's, if one).")
    ] = None,
    super_pod: Annotated[
        Optional[bool], typer.Option("--super-pod/--no-super-pod", help="A3 SuperPoD sp-block annotation (default: on for a3).")
    ] = None,
    queue: Annotated[str, typer.Option("--queue", help="The Volcano queue.")] = "default",
    hccl: Annotated[
        list[str], typer.Option("--hccl", help="An HCCL variable for every pod, NAME=VALUE (checked by the launch rules).")
    ] = [],  # noqa: B006
    kube_version: Annotated[str, typer.Option("--kube-version", help="Kubernetes version of the schemas checked against.")] = (
        "1.30"
    ),
    force: ForceOpt = False,
    json_out: JsonOpt = False,
) -> None:
    """Write a kustomize base: a smoke Job per node, an AscendJob / Volcano Job / PyTorchJob or a vLLM Ascend server.

    Every document is checked before anything is written (Kubernetes schemas, the CRDs, envkit's rules).
    Exit 0 when written, 1 when a rendered document breaks a check, 2 on bad input (with what to do next).
    """
    from envkit.cli import lock_check
    from envkit.errors import BadInput
    from envkit.jobs.k8s.render import K8sOptions, format_result, render_k8s

    pairs = []
    for item in hccl:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise BadInput(f"--hccl {item[:60]!r} is not NAME=VALUE", hint="e.g. --hccl HCCL_CONNECT_TIMEOUT=600")
        pairs.append((key, value))
    uid, sep, gid = run_as.partition(":")
    if (
        not sep
        or not uid.isascii()
        or not uid.isdigit()
        or not gid.isascii()
        or not gid.isdigit()
        or max(len(uid), len(gid)) > 10
    ):
        raise BadInput(f"--run-as {run_as[:40]!r} is not UID:GID", hint="e.g. --run-as 1000:1000 (the image's HwHiAiUser)")
    opts = K8sOptions(
        image=image,
        nodes=tuple(node),
        node_count=node_count,
        namespace=namespace,
        engine=engine,
        scheduler=scheduler,
        resource=resource,
        serving=serving,
        npus_per_node=npus_per_node,
        name=name,
        script=script,
        launcher=launcher,
        model=model,
        accelerator_type=accelerator_type,
        super_pod=super_pod,
        queue=queue,
        hccl=tuple(pairs),
        kube_version=kube_version,
        schedule_policy=schedule_policy,
        rank_table_timeout=rank_table_timeout,
        smoke_only=smoke_only,
        model_pvc=model_pvc,
        model_host_path=model_host_path,
        model_mount=model_mount,
        cpu=cpu,
        memory=memory,
        run_as=(int(uid), int(gid)),
        socket_ifname=socket_ifname,
        ray_timeout=ray_timeout,
    )
    result = render_k8s(lock, out, opts, force=force, lock_check=lock_check(ctx))
    if json_out:
        console.emit_json(result.to_dict())
    else:
        for line in format_result(result):
            console.out.print(line, markup=False)


EXAMPLE = "envkit k8s render --lock envkit.lock --image registry.local/envkit/910b:v1 --node node-a --node node-b -o k8s/"


def register(app: typer.Typer) -> None:
    group = typer.Typer(
        help="Kubernetes manifests from the lock: smoke per node, training (AscendJob, Volcano, PyTorchJob), serving.",
        no_args_is_help=True,
        epilog=example(EXAMPLE),
    )
    group.command(
        "render",
        epilog=example(
            EXAMPLE, "envkit k8s render --lock serve.lock --image registry.local/envkit/a3:serve --node-count 2 -o k8s-serve/"
        ),
    )(render)
    app.add_typer(group, name="k8s")
