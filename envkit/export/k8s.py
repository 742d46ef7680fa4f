"""Kubernetes manifests from the lock: a kustomize base of plain data (dicts), rendered with a safe YAML dumper.

Part of the export layer (pure: no file is read, nothing is written). What a pod needs comes
from the lock through `ContainerFacts` (devices, mounts, environment, the device plugin's resource); the launch
(torchrun or Accelerate) and the HCCL environment from the same functions `envkit launch render` uses
(`envkit.export.launch`, `envkit.fleet.env`); the chip's node labels and the NPUs a pod may take from the lock's
`platform.kubernetes` (MindCluster's documented values, sourced in matrices/platform.yaml and copied by resolve).

Documents:
  smoke/<node>.yaml       one batch/v1 Job per named node: pinned to it, all its NPUs, `envkit smoke --device npu --json`
  training/*.yaml         AscendJob (default) + its `rings-config-<job>` ConfigMap, or a Volcano Job (svc, env
                          plugins) + the same ConfigMap, or a Kubeflow PyTorchJob v1
  serving/*.yaml          a vLLM Ascend server: a Deployment (one node) or a LeaderWorkerSet (several), and a Service
  kustomization.yaml      the base (`kubectl kustomize DIR`)
Every value from the lock or the command line lands in a YAML string through the dumper (never a template), and a
shell line (LWS's Ray start) quotes each word with `shlex.quote`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from envkit.errors import BadInput, Where
from envkit.export.container import NPU_SERVING_ENV
from envkit.export.facts import ContainerFacts, container_facts
from envkit.export.launch import accelerate_config, torchrun_argv, train_script
from envkit.models.lock import Lock

ENGINES = ("ascendjob", "volcano", "pytorchjob")
SCHEDULERS = ("volcano", "default")
LAUNCHERS = ("torchrun", "accelerate")
CONTAINER = {"ascendjob": "ascend", "volcano": "ascend", "pytorchjob": "pytorch"}  # the operators' rules
SERVING_CONTAINER = "ascend"
ASCENDJOB_PORT = ("ascendjob-port", 2222)  # MC: ascend_job.md ("do not modify" the name), constants.go DefaultPort
PYTORCHJOB_PORT = ("pytorchjob-port", 23456)  # training-operator release-1.9 pytorch_types.go
VOLCANO_PORT = ("rendezvous", 29500)  # torchrun's default; the svc plugin opens every port of the headless service
SERVE_PORT = 8000
RAY_PORT = 6379
RANK_TABLE_DIR = "/user/serverid/devindex/config"  # MC: hccl.json_file_description.md
RANK_TABLE_KEY = "hccl.json"
LAUNCH_DIR = "/etc/envkit/launch"
MANAGED = {"app.kubernetes.io/managed-by": "envkit"}
MAX_NODES = 1024
_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")  # a DNS-1123 label
_NODE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$")  # a node name (DNS-1123 subdomain)
_RESOURCE = re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?/[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_IMAGE = re.compile(r"^[a-z0-9][a-z0-9._/:-]{0,254}(@sha256:[0-9a-f]{64})?$|^[a-z0-9][a-z0-9._/:-]{0,254}:[A-Za-z0-9_.-]{1,128}$")
_LABEL_VALUE = re.compile(r"^([A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?)?$")
_K8S_VERSION = re.compile(r"^1\.[0-9]{2}$")


@dataclass(frozen=True)
class ChipK8s:
    """The lock's `platform.kubernetes` as the plan uses it (NPU counts as numbers, the sources as one line)."""

    chip: str
    accelerator: str
    accelerator_type: dict[int, str]
    host_arch: str | None
    ring_controller: str
    pod_npus: tuple[int, ...]
    multi_node_pod_npus: tuple[int, ...]
    sp_block: int | None
    source: str


def chip_k8s(lock: Lock) -> ChipK8s:
    """The Kubernetes facts the lock carries for its chip and arch; BadInput (exit 2) where it carries none."""
    k = lock.platform.kubernetes
    if k is None:
        raise _bad(
            f"the lock carries no Kubernetes facts for chip {lock.stack.chip} (platform.kubernetes: node labels, NPUs per pod)",
            f"A lock from an older envkit lacks them: resolve it again with this envkit (`{lock.generated_by}`) and "
            "render from the new lock. If that lock has none either, envkit has no MindCluster facts for the chip.",
            "platform.kubernetes",
        )
    return ChipK8s(
        chip=lock.stack.chip,
        accelerator=k.accelerator,
        accelerator_type={int(n): v for n, v in k.accelerator_type.items()},
        host_arch=k.host_arch,
        ring_controller=k.ring_controller,
        pod_npus=tuple(k.pod_npus),
        multi_node_pod_npus=tuple(k.multi_node_pod_npus),
        sp_block=k.sp_block,
        source="; ".join(k.source),
    )


@dataclass(frozen=True)
class K8sOptions:
    """What `envkit k8s render` takes besides the lock."""

    image: str | None = None
    nodes: tuple[str, ...] = ()
    node_count: int | None = None
    namespace: str = "default"
    engine: str = "ascendjob"
    scheduler: str = "volcano"
    resource: str | None = None
    serving: bool | None = None  # None: on for a serving lock
    npus_per_node: int | None = None
    name: str | None = None
    script: str = "train.py"
    launcher: str = "torchrun"
    model: str = "/models/model"
    accelerator_type: str | None = None
    super_pod: bool | None = None  # None: on where the chip has a SuperPoD block (a3)
    queue: str = "default"
    hccl: tuple[tuple[str, str], ...] = ()
    kube_version: str = "1.30"


@dataclass
class K8sPlan:
    """The base: documents by file (each file one document), the kustomization, the README, what the rules need."""

    chip: str
    name: str
    namespace: str
    image: str
    resource: str
    npus_per_node: int
    node_count: int
    engine: str
    serving: bool
    kube_version: str
    node_labels: dict[str, str] = field(default_factory=dict)
    files: dict[str, dict[str, Any]] = field(default_factory=dict)
    readme: str = ""
    notes: list[str] = field(default_factory=list)

    def kustomization(self) -> dict[str, Any]:
        return {
            "apiVersion": "kustomize.config.k8s.io/v1beta1",
            "kind": "Kustomization",
            "namespace": self.namespace,
            "resources": sorted(self.files),
        }


def is_serving_lock(lock: Lock) -> bool:
    return lock.stack.vllm_ascend is not None


def _bad(message: str, hint: str, key: str | None = None) -> BadInput:
    return BadInput(message, where=Where(None, None, key) if key else None, hint=hint)


def _check_options(lock: Lock, opts: K8sOptions) -> None:
    if opts.engine not in ENGINES:
        raise _bad(f"--engine {opts.engine[:40]!r} is not a job engine envkit renders", f"Use one of {', '.join(ENGINES)}.")
    if opts.scheduler not in SCHEDULERS:
        raise _bad(f"--scheduler {opts.scheduler[:40]!r}: use volcano or default", "volcano: MindCluster's scheduler.")
    if opts.launcher not in LAUNCHERS:
        raise _bad(f"--launcher {opts.launcher[:40]!r}: use torchrun or accelerate", "torchrun is the default.")
    if not _K8S_VERSION.fullmatch(opts.kube_version):
        raise _bad(f"--kube-version {opts.kube_version[:20]!r} is not MAJOR.MINOR", "e.g. --kube-version 1.30")
    for what, value in (("--namespace", opts.namespace), ("--name", opts.name or "x"), ("--queue", opts.queue)):
        if len(value) > 63 or not _NAME.fullmatch(value):
            raise _bad(
                f"{what} {value[:80]!r} is not a Kubernetes name",
                "Lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit.",
            )
    if opts.image is None:
        raise _bad(
            f"the lock records no image reference for chip {lock.stack.chip}, and no --image was given",
            "Build the image (`envkit image build --lock LOCK --tag REGISTRY/NAME:TAG`), push it to a registry "
            "the cluster pulls from, and pass --image REGISTRY/NAME@sha256:DIGEST (or :TAG).",
            "image",
        )
    if not _IMAGE.fullmatch(opts.image):
        raise _bad(
            f"--image {opts.image[:80]!r} is not an image reference",
            "REGISTRY/NAME:TAG or REGISTRY/NAME@sha256:<64 hex> (lower-case repository).",
        )
    if opts.resource is not None and (len(opts.resource) > 127 or not _RESOURCE.fullmatch(opts.resource)):
        raise _bad(f"--resource {opts.resource[:80]!r} is not an extended resource name", "e.g. huawei.com/ascend-1980")
    if opts.accelerator_type is not None and not (_LABEL_VALUE.fullmatch(opts.accelerator_type) and opts.accelerator_type):
        raise _bad(f"--accelerator-type {opts.accelerator_type[:80]!r} is not a label value", "e.g. module-910b-8")
    if opts.nodes and opts.node_count is not None and opts.node_count != len(opts.nodes):
        raise _bad(
            f"--node-count {opts.node_count} but {len(opts.nodes)} --node names",
            "Give node names (--node NAME, repeated) or a count (--node-count N), not both.",
        )
    for node in opts.nodes:
        if len(node) > 253 or not _NODE.fullmatch(node):
            raise _bad(f"--node {node[:80]!r} is not a Kubernetes node name", "As `kubectl get nodes` prints it.")
    if len(set(opts.nodes)) != len(opts.nodes):
        raise _bad("a --node is named twice", "Name each node once.")
    if not opts.nodes and opts.node_count is None:
        raise _bad("no nodes: give --node NAME (repeated) or --node-count N", "Node names also render the per-node smoke Jobs.")
    count = len(opts.nodes) or (opts.node_count or 0)
    if not 1 <= count <= MAX_NODES:
        raise _bad(f"--node-count {count}: 1 to {MAX_NODES}", "One pod per node.")
    try:
        train_script(opts.script, Where(None, None, "--script"))
    except BadInput as exc:
        raise _bad(f"--script {opts.script[:80]!r} is not a plain script path", exc.hint or "", "--script") from None
    if not opts.model or len(opts.model) > 1024 or any(c in opts.model for c in "\x00\n\r"):
        raise _bad(f"--model {opts.model[:80]!r} is not a model name or path", "A Hugging Face id or a path in the pod.")


def _npus(lock: Lock, opts: K8sOptions, chip: ChipK8s, nodes: int, training: bool) -> int:
    davinci = lock.platform.davinci_devices
    npn = opts.npus_per_node if opts.npus_per_node is not None else davinci
    if npn is None:
        raise _bad(
            f"the NPUs of a {lock.stack.chip} node depend on the cards installed",
            "Pass --npus-per-node N (what the device plugin advertises: "
            f"`kubectl describe node NODE | grep {lock.platform.device_plugin_resource or 'huawei.com'}`).",
        )
    if npn not in chip.pod_npus or (davinci is not None and npn > davinci and npn not in chip.accelerator_type):
        allowed = [n for n in chip.pod_npus if davinci is None or n <= davinci or n in chip.accelerator_type]
        raise _bad(
            f"--npus-per-node {npn}: a {lock.stack.chip} pod takes {', '.join(map(str, allowed))} NPUs",
            f"Source: {chip.source}",
        )
    if nodes > 1 and training:
        if not chip.multi_node_pod_npus or lock.platform.hccl.rank_table is None:
            raise _bad(
                f"{nodes} nodes: chip {lock.stack.chip} has no HCCL rank table format, so no training across nodes",
                "Render one node (--node-count 1), or serve instead (--serving).",
            )
        if npn not in chip.multi_node_pod_npus:
            raise _bad(
                f"{nodes} nodes x {npn} NPUs: a {lock.stack.chip} job across nodes takes whole nodes "
                f"({' or '.join(map(str, chip.multi_node_pod_npus))} NPUs per pod)",
                f"Use --npus-per-node {chip.multi_node_pod_npus[0]}, or one node. Source: {chip.source}",
            )
    return npn


def _super_pod(opts: K8sOptions, chip: ChipK8s, npn: int) -> int | None:
    on = opts.super_pod if opts.super_pod is not None else chip.sp_block is not None
    if not on:
        return None
    if chip.sp_block is None:
        raise _bad(f"--super-pod: chip {chip.chip} has no SuperPoD block", "Only an A3 SuperPoD takes sp-block.")
    if npn != chip.sp_block:
        raise _bad(
            f"--npus-per-node {npn} on an A3 SuperPoD: with sp-block every pod takes {chip.sp_block} NPUs",
            f"Use --npus-per-node {chip.sp_block}, or --no-super-pod. Source: {chip.source}",
        )
    return chip.sp_block


def _volume_name(path: str) -> str:
    name = "host-" + re.sub(r"[^a-z0-9]+", "-", path.lower()).strip("-")
    return name[:63].rstrip("-")


def _hccl_env(lock: Lock, opts: K8sOptions, nodes: int) -> dict[str, str]:
    """The HCCL block of the fleet layer (`envkit.fleet.env.plan_env`, the rules the lock carries): every pod the same,
    the socket interface by name (a pod's IP is not known before it starts)."""
    from envkit.fleet.data import from_lock
    from envkit.fleet.env import ORDER, plan_env
    from envkit.fleet.inventory import Host

    given = dict(opts.hccl)
    for key in given:
        if key not in ORDER:
            raise _bad(f"--hccl {key[:40]}=...: not an HCCL variable envkit checks", f"One of {', '.join(ORDER)}.")
    if "HCCL_IF_IP" in given:
        raise _bad(
            "--hccl HCCL_IF_IP: a pod's address is known only once it runs",
            "Name the interface instead: --hccl HCCL_SOCKET_IFNAME=eth0 (the default).",
        )
    given.setdefault("HCCL_SOCKET_IFNAME", "eth0")
    vars_ = {k.lower(): v for k, v in given.items()}
    hosts = [Host(name=f"pod-{i}", vars=vars_, line=0) for i in range(max(nodes, 1))]
    plan = plan_env(hosts, lock.stack.chip, from_lock(lock.stack.chip, lock.platform.hccl), "--hccl")
    return plan.per_host[hosts[0].name]


class _Pod:
    """What every pod template of the base shares, built once per plan."""

    def __init__(self, lock: Lock, opts: K8sOptions, facts: ContainerFacts, chip: ChipK8s, resource: str, npn: int) -> None:
        self.lock, self.opts, self.facts, self.chip, self.resource, self.npn = lock, opts, facts, chip, resource, npn
        self.node_selector: dict[str, str] = {"accelerator": chip.accelerator}
        if chip.host_arch:
            self.node_selector["host-arch"] = chip.host_arch
        acc_type = opts.accelerator_type or chip.accelerator_type.get(npn)
        if acc_type:
            self.node_selector["accelerator-type"] = acc_type

    def env(self, extra: dict[str, str] | None = None) -> list[dict[str, Any]]:
        env: list[dict[str, Any]] = [{"name": k, "value": v} for k, v in self.facts.environment]
        for k, v in sorted((extra or {}).items()):
            env.append({"name": k, "value": v})
        if self.opts.scheduler == "volcano":
            # MindCluster: with Volcano's Ascend plugin the allocated chips are in the pod annotation named like the
            # resource; without Volcano the device plugin sets the variable itself (the fieldRef is left out).
            env.append(
                {
                    "name": "ASCEND_VISIBLE_DEVICES",
                    "valueFrom": {"fieldRef": {"fieldPath": f"metadata.annotations['{self.resource}']"}},
                }
            )
        return env

    def resources(self) -> dict[str, Any]:
        return {"requests": {self.resource: self.npn}, "limits": {self.resource: self.npn}}

    def mounts(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        for host, target, mode in self.facts.mounts:
            name = _volume_name(target)
            mounts.append({"name": name, "mountPath": target, "readOnly": mode == "ro"})
            volumes.append({"name": name, "hostPath": {"path": host}})
        return mounts, volumes

    def container(self, name: str, command: list[str], env: dict[str, str] | None = None) -> dict[str, Any]:
        mounts, _ = self.mounts()
        return {
            "name": name,
            "image": self.opts.image,
            "imagePullPolicy": "IfNotPresent",
            "command": command,
            "env": self.env(env),
            "resources": self.resources(),
            "volumeMounts": mounts,
        }

    def spec(
        self, containers: list[dict[str, Any]], restart: str, extra_volumes: list[dict[str, Any]] | None = None
    ) -> dict[str, Any]:
        _, volumes = self.mounts()
        spec: dict[str, Any] = {
            "containers": containers,
            "nodeSelector": dict(self.node_selector),
            "restartPolicy": restart,
            "volumes": volumes + (extra_volumes or []),
        }
        if self.opts.scheduler == "volcano":
            spec["schedulerName"] = "volcano"
        return spec


def _labels(plan: K8sPlan, component: str) -> dict[str, str]:
    return {
        **MANAGED,
        "app.kubernetes.io/name": plan.name,
        "app.kubernetes.io/component": component,
        "envkit.io/chip": plan.chip,
    }


def _meta(plan: K8sPlan, name: str, component: str, **extra: Any) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": plan.namespace, "labels": _labels(plan, component)}
    meta.update(extra)
    return meta


def _one_per_node(plan: K8sPlan, job_label: str) -> dict[str, Any]:
    """Pods of one job on distinct nodes (each takes a whole node's NPUs; this says so to the scheduler)."""
    return {
        "podAntiAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": [
                {
                    "labelSelector": {"matchExpressions": [{"key": "envkit.io/job", "operator": "In", "values": [job_label]}]},
                    "topologyKey": "kubernetes.io/hostname",
                }
            ]
        }
    }


def _pinned(nodes: tuple[str, ...]) -> dict[str, Any]:
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "kubernetes.io/hostname", "operator": "In", "values": list(nodes)}]}
                ]
            }
        }
    }


def _affinity(plan: K8sPlan, nodes: tuple[str, ...], job_label: str) -> dict[str, Any]:
    affinity = _one_per_node(plan, job_label)
    if nodes:
        affinity.update(_pinned(nodes))
    return affinity


# --- smoke ----------------------------------------------------------------------------------------------------------
def _smoke(plan: K8sPlan, pod: _Pod, nodes: tuple[str, ...]) -> None:
    for node in nodes:
        name = f"{plan.name}-smoke-{node}"[:63].rstrip("-.").replace(".", "-")
        container = pod.container(
            "ascend", ["envkit", "smoke", "--device", "npu", "--json", "--out", "/tmp/envkit-smoke"], {"ENVKIT_NODE": node}
        )
        spec = pod.spec([container], "Never")
        spec["nodeSelector"]["kubernetes.io/hostname"] = node
        labels = {**_labels(plan, "smoke"), "envkit.io/job": name}
        plan.files[f"smoke/{node}.yaml"] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": plan.namespace, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "template": {"metadata": {"labels": labels}, "spec": spec},
            },
        }


# --- training -------------------------------------------------------------------------------------------------------
def _launch_command(opts: K8sOptions, nodes: int, npn: int, rank: str, master: str, port: str) -> list[str]:
    """torchrun or `accelerate launch`, from the launch layer; rank, master and port come from the pod's environment
    (Kubernetes expands `$(VAR)` in a container's command)."""
    if opts.launcher == "torchrun":
        return torchrun_argv(nodes, npn, rank, master, port, opts.script)
    return [
        "accelerate",
        "launch",
        "--config_file",
        f"{LAUNCH_DIR}/accelerate_config.yaml",
        f"--machine_rank={rank}",
        f"--main_process_ip={master}",
        f"--main_process_port={port}",
        opts.script,
    ]


def _launch_configmap(plan: K8sPlan, opts: K8sOptions, nodes: int, npn: int, master: str, port: int) -> list[dict[str, Any]]:
    """Accelerate's config file (the launch layer's `accelerate_config`), rank and master overridden per pod."""
    if opts.launcher != "accelerate":
        return []
    name = f"{plan.name}-launch"
    plan.files["training/launch-configmap.yaml"] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(plan, name, "training"),
        "data": {"accelerate_config.yaml": accelerate_config(nodes, nodes * npn, 0, master, port)},
    }
    return [{"name": "launch", "configMap": {"name": name}}]


def _rank_table_configmap(plan: K8sPlan, chip: ChipK8s) -> list[dict[str, Any]]:
    """The ConfigMap the Ascend Operator fills (`rings-config-<job>`, key hccl.json); envkit writes its first state."""
    name = f"rings-config-{plan.name}"
    meta = _meta(plan, name, "training")
    meta["labels"]["ring-controller.atlas"] = chip.ring_controller
    plan.files["training/rings-config.yaml"] = {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": meta,
        "data": {RANK_TABLE_KEY: '{"status":"initializing"}'},
    }
    return [{"name": "ranktable", "configMap": {"name": name}}]


def _training(plan: K8sPlan, pod: _Pod, opts: K8sOptions, chip: ChipK8s, nodes: int, sp_block: int | None) -> None:
    npn = plan.npus_per_node
    engine = opts.engine
    container_name = CONTAINER[engine]
    hccl = _hccl_env(pod.lock, opts, nodes)
    extra_volumes: list[dict[str, Any]] = []
    extra_mounts: list[dict[str, Any]] = []
    env = dict(hccl)
    if engine in ("ascendjob", "volcano"):
        extra_volumes += _rank_table_configmap(plan, chip)
        extra_mounts.append({"name": "ranktable", "mountPath": RANK_TABLE_DIR, "readOnly": True})
        env["RANK_TABLE_FILE"] = f"{RANK_TABLE_DIR}/{RANK_TABLE_KEY}"
    if engine == "ascendjob":
        port_name, port = ASCENDJOB_PORT
        rank, master, port_ref = "$(RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)"
        static_master = f"{plan.name}-master-0"
    elif engine == "pytorchjob":
        port_name, port = PYTORCHJOB_PORT
        rank, master, port_ref = "$(RANK)", "$(MASTER_ADDR)", "$(MASTER_PORT)"
        static_master = f"{plan.name}-master-0"
    else:
        port_name, port = VOLCANO_PORT
        static_master = f"{plan.name}-worker-0.{plan.name}"  # the svc plugin: hostname = pod name, subdomain = job
        rank, master, port_ref = "$(VC_TASK_INDEX)", static_master, str(port)
    launch_volumes = _launch_configmap(plan, opts, nodes, npn, static_master, port)
    if launch_volumes:
        extra_volumes += launch_volumes
        extra_mounts.append({"name": "launch", "mountPath": LAUNCH_DIR, "readOnly": True})
    command = _launch_command(opts, nodes, npn, rank, master, port_ref)
    container = pod.container(container_name, command, env)
    container["volumeMounts"] = container["volumeMounts"] + extra_mounts
    container["ports"] = [{"name": port_name, "containerPort": port}]
    job_label = plan.name
    pod_labels = {**_labels(plan, "training"), "envkit.io/job": job_label}
    if engine in ("ascendjob", "volcano"):
        pod_labels["ring-controller.atlas"] = chip.ring_controller

    def template() -> dict[str, Any]:
        spec = pod.spec([dict(container)], "Never", extra_volumes)
        spec["affinity"] = _affinity(plan, opts.nodes, job_label)
        return {"metadata": {"labels": dict(pod_labels)}, "spec": spec}

    annotations = {"sp-block": str(sp_block)} if sp_block is not None else None
    if engine == "ascendjob":
        meta = _meta(plan, plan.name, "training")
        meta["labels"].update({"framework": "pytorch", "ring-controller.atlas": chip.ring_controller})
        if annotations:
            meta["annotations"] = annotations
        spec: dict[str, Any] = {
            "replicaSpecs": _master_workers(template, nodes),
            "runPolicy": {"backoffLimit": 0},
            "successPolicy": "AllWorkers",
        }
        if opts.scheduler == "volcano":
            spec["schedulerName"] = "volcano"
            spec["runPolicy"]["schedulingPolicy"] = {"minAvailable": nodes, "queue": opts.queue}
        plan.files["training/ascendjob.yaml"] = {
            "apiVersion": "mindxdl.gitee.com/v1",
            "kind": "AscendJob",
            "metadata": meta,
            "spec": spec,
        }
    elif engine == "volcano":
        meta = _meta(plan, plan.name, "training")
        meta["labels"]["ring-controller.atlas"] = chip.ring_controller
        if annotations:
            meta["annotations"] = annotations
        plan.files["training/vcjob.yaml"] = {
            "apiVersion": "batch.volcano.sh/v1alpha1",
            "kind": "Job",
            "metadata": meta,
            "spec": {
                "schedulerName": "volcano",
                "minAvailable": nodes,
                "queue": opts.queue,
                "maxRetry": 0,
                "plugins": {"env": [], "svc": []},
                "tasks": [{"name": "worker", "replicas": nodes, "template": template()}],
            },
        }
    else:
        meta = _meta(plan, plan.name, "training")
        if annotations:
            meta["annotations"] = annotations
        spec = {
            "nprocPerNode": str(npn),
            "pytorchReplicaSpecs": _master_workers(template, nodes),
            "runPolicy": {"backoffLimit": 0},
        }
        if opts.scheduler == "volcano":
            spec["runPolicy"]["schedulingPolicy"] = {"minAvailable": nodes, "queue": opts.queue}
        plan.files["training/pytorchjob.yaml"] = {
            "apiVersion": "kubeflow.org/v1",
            "kind": "PyTorchJob",
            "metadata": meta,
            "spec": spec,
        }


def _master_workers(template: Callable[[], dict[str, Any]], nodes: int) -> dict[str, Any]:
    """The one Master and the Workers of an AscendJob's or a PyTorchJob's replica specs, never restarted."""
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template()}}
    if nodes > 1:
        replicas["Worker"] = {"replicas": nodes - 1, "restartPolicy": "Never", "template": template()}
    return replicas


# --- serving --------------------------------------------------------------------------------------------------------
def _probes() -> dict[str, Any]:
    def get(delay: int, period: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": "/health", "port": SERVE_PORT},
            "initialDelaySeconds": delay,
            "periodSeconds": period,
            "failureThreshold": failures,
        }

    # vllm-ascend's Kthena example: readiness and liveness on /health:8000, liveness after 900 s (a model loads first)
    return {"readinessProbe": get(30, 10, 3), "livenessProbe": get(900, 30, 3)}


def _serve_argv(opts: K8sOptions, npn: int, nodes: int) -> list[str]:
    argv = ["vllm", "serve", opts.model, "--host", "0.0.0.0", "--port", str(SERVE_PORT), "--tensor-parallel-size", str(npn)]
    if nodes > 1:
        argv += ["--pipeline-parallel-size", str(nodes), "--distributed-executor-backend", "ray"]
    return argv


def _serving(plan: K8sPlan, pod: _Pod, opts: K8sOptions, nodes: int, sp_block: int | None) -> None:
    npn = plan.npus_per_node
    env = dict(NPU_SERVING_ENV)
    selector = {"app.kubernetes.io/name": plan.name, "app.kubernetes.io/component": "serving"}
    port = [{"name": "http", "containerPort": SERVE_PORT}]
    annotations = {"sp-block": str(sp_block)} if sp_block is not None else None
    if nodes == 1:
        container = pod.container(SERVING_CONTAINER, _serve_argv(opts, npn, 1), env)
        container.update({"ports": port, **_probes()})
        spec = pod.spec([container], "Always")
        if opts.nodes:
            spec["affinity"] = _pinned(opts.nodes)
        tmeta: dict[str, Any] = {"labels": _labels(plan, "serving")}
        if annotations:
            tmeta["annotations"] = annotations
        plan.files["serving/deployment.yaml"] = {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(plan, plan.name, "serving"),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": selector},
                "strategy": {"type": "Recreate"},  # the new pod needs the NPUs the old one holds
                "template": {"metadata": tmeta, "spec": spec},
            },
        }
        service_selector = selector
    else:
        env.update(_hccl_env(pod.lock, opts, nodes))
        serve = shlex.join(_serve_argv(opts, npn, nodes))
        leader_sh = f"ray start --head --port={RAY_PORT} && exec {serve}"
        worker_sh = f'exec ray start --address="$LWS_LEADER_ADDRESS:{RAY_PORT}" --block'
        leader = pod.container(SERVING_CONTAINER, ["/bin/sh", "-c", leader_sh], env)
        leader.update({"ports": port, **_probes()})
        worker = pod.container(SERVING_CONTAINER, ["/bin/sh", "-c", worker_sh], env)

        def template(role: str, container: dict[str, Any]) -> dict[str, Any]:
            spec = pod.spec([container], "Always")
            affinity = _one_per_node(plan, plan.name)
            if opts.nodes:
                affinity.update(_pinned(opts.nodes))
            spec["affinity"] = affinity
            meta: dict[str, Any] = {"labels": {**_labels(plan, "serving"), "envkit.io/job": plan.name, "role": role}}
            if annotations:
                meta["annotations"] = annotations
            return {"metadata": meta, "spec": spec}

        plan.files["serving/leaderworkerset.yaml"] = {
            "apiVersion": "leaderworkerset.x-k8s.io/v1",
            "kind": "LeaderWorkerSet",
            "metadata": _meta(plan, plan.name, "serving"),
            "spec": {
                "replicas": 1,
                "startupPolicy": "LeaderCreated",
                "leaderWorkerTemplate": {
                    "size": nodes,
                    "restartPolicy": "RecreateGroupOnPodRestart",
                    "leaderTemplate": template("leader", leader),
                    "workerTemplate": template("worker", worker),
                },
            },
        }
        service_selector = {"leaderworkerset.sigs.k8s.io/name": plan.name, "role": "leader"}
    plan.files["serving/service.yaml"] = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(plan, f"{plan.name}-leader" if nodes > 1 else plan.name, "serving"),
        "spec": {
            "type": "ClusterIP",
            "selector": service_selector,
            "ports": [{"name": "http", "port": SERVE_PORT, "targetPort": SERVE_PORT, "protocol": "TCP"}],
        },
    }


# --- the plan -------------------------------------------------------------------------------------------------------
def plan_k8s(lock: Lock, opts: K8sOptions) -> K8sPlan:
    """The base for `lock` (pure: the same lock and options give the same documents)."""
    _check_options(lock, opts)
    chip = chip_k8s(lock)
    serving = is_serving_lock(lock) if opts.serving is None else opts.serving
    if serving and not is_serving_lock(lock):
        raise _bad(
            "--serving needs a serving lock; this lock pins no vllm-ascend",
            "Resolve a serving stack (`envkit resolve --workload serving`) and render again.",
            "stack.vllm_ascend",
        )
    resource = opts.resource or lock.platform.device_plugin_resource
    if resource is None:
        raise _bad(
            f"the lock names no device-plugin resource for chip {lock.stack.chip}",
            "Pass --resource NAME (what `kubectl describe node` lists under Allocatable, e.g. huawei.com/Ascend910).",
            "platform.device_plugin_resource",
        )
    nodes = len(opts.nodes) or (opts.node_count or 0)
    npn = _npus(lock, opts, chip, nodes, training=not serving)
    sp_block = _super_pod(opts, chip, npn)
    davinci = lock.platform.davinci_devices
    devices = f"0-{npn - 1}" if davinci is None or npn <= davinci else None
    facts = container_facts(lock, devices)
    name = opts.name or f"envkit-{lock.stack.chip}"
    assert opts.image is not None  # _check_options
    plan = K8sPlan(
        chip=lock.stack.chip,
        name=name,
        namespace=opts.namespace,
        image=opts.image,
        resource=resource,
        npus_per_node=npn,
        node_count=nodes,
        engine=opts.engine,
        serving=serving,
        kube_version=opts.kube_version,
    )
    pod = _Pod(lock, opts, facts, chip, resource, npn)
    plan.node_labels = dict(pod.node_selector)
    _smoke(plan, pod, opts.nodes)
    if serving:
        _serving(plan, pod, opts, nodes, sp_block)
    else:
        _training(plan, pod, opts, chip, nodes, sp_block)
    if not opts.nodes:
        plan.notes.append("no --node names: the per-node smoke Jobs are not rendered (they are pinned by node name)")
    if "@sha256:" not in opts.image:
        plan.notes.append(f"--image {opts.image} is not digest-pinned: nodes may pull different images under one tag")
    if opts.resource and opts.resource != lock.platform.device_plugin_resource:
        plan.notes.append(
            f"--resource {opts.resource} overrides the lock's {lock.platform.device_plugin_resource}: the node labels "
            "and ASCEND_VISIBLE_DEVICES annotation are MindCluster's; check them against your device plugin"
        )
    plan.readme = readme(plan, opts, chip, sp_block)
    return plan


def readme(plan: K8sPlan, opts: K8sOptions, chip: ChipK8s, sp_block: int | None) -> str:
    smoke = sorted(f for f in plan.files if f.startswith("smoke/"))
    workload = "serving" if plan.serving else f"training ({plan.engine})"
    lines = [
        f"# Kubernetes base for chip {plan.chip}: smoke per node and {workload}",
        "",
        "Rendered by `envkit k8s render` from the lock alone; do not edit (render again). Every document was checked",
        f"before it was written: core kinds against the Kubernetes {plan.kube_version} OpenAPI schemas (kubernetes-validate,",
        "strict, offline), custom resources against their upstream CRDs' openAPIV3Schema (vendored in envkit, unknown",
        "fields refused), and envkit's own rules (requests = limits, one Master, the container name, no DaemonSet,",
        "the image). No API server was asked: a server-side dry run is yours to run (below).",
        "",
        f"- image: `{plan.image}`",
        f"- resource: `{plan.resource}` x {plan.npus_per_node} per pod (requests = limits), {plan.node_count} node(s)",
        f"- node labels: {', '.join(f'`{k}={v}`' for k, v in sorted(plan.node_labels.items()))}",
        f"- scheduler: {opts.scheduler}"
        + (" (ASCEND_VISIBLE_DEVICES from the pod annotation)" if opts.scheduler == "volcano" else ""),
    ]
    if sp_block is not None:
        lines.append(f'- A3 SuperPoD: annotation `sp-block: "{sp_block}"`')
    lines += [
        "",
        "## Apply",
        "",
        "```sh",
        "kubectl kustomize .                      # what will be applied",
        "kubectl apply --dry-run=server -k .      # the API server's own check (CRDs installed)",
        "kubectl apply -k .",
        "```",
        "",
    ]
    if smoke:
        lines += [
            "## Smoke results",
            "",
            "One Job per node runs `envkit smoke --device npu --json`; its log is the report (exit 0 = every check passed).",
            "",
            "```sh",
            f"kubectl -n {plan.namespace} get jobs -l app.kubernetes.io/component=smoke",
            f"kubectl -n {plan.namespace} logs job/{plan.name}-smoke-NODE > NODE.json",
            "```",
            "",
        ]
    if plan.serving:
        lines += [
            "## Serving",
            "",
            f"vLLM Ascend serves `{opts.model}` on port {SERVE_PORT} (`/health` for readiness and liveness):",
            "",
            "```sh",
            f"kubectl -n {plan.namespace} port-forward svc/{plan.name}{'-leader' if plan.node_count > 1 else ''} {SERVE_PORT}:{SERVE_PORT}",
            f"curl -s localhost:{SERVE_PORT}/v1/models",
            "```",
            "",
        ]
    else:
        lines += [
            "## Training",
            "",
            f"The job runs `{opts.launcher}` on `{opts.script}` in every pod (one pod per node, {plan.npus_per_node} processes each);",
            "put the script in the image or mount it. HCCL reads the rank table the Ascend Operator writes into the",
            f"`rings-config-{plan.name}` ConfigMap (RANK_TABLE_FILE)."
            if plan.engine != "pytorchjob"
            else "PyTorchJob sets MASTER_ADDR, MASTER_PORT and RANK.",
            "",
        ]
    if plan.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in plan.notes] + [""]
    return "\n".join(lines)


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod spec a document holds (a Job's, a Deployment's, each replica's or task's, LWS's two)."""
    spec = doc.get("spec") or {}
    templates: list[Any] = []
    kind = doc.get("kind")
    if kind in ("Job", "Deployment", "DaemonSet", "StatefulSet") and "template" in spec:
        templates.append(spec["template"])
    for replica in (spec.get("replicaSpecs") or spec.get("pytorchReplicaSpecs") or {}).values():
        templates.append(replica.get("template"))
    for task in spec.get("tasks") or []:
        templates.append(task.get("template"))
    lwt = spec.get("leaderWorkerTemplate") or {}
    for key in ("leaderTemplate", "workerTemplate"):
        if key in lwt:
            templates.append(lwt[key])
    return [t["spec"] for t in templates if isinstance(t, dict) and isinstance(t.get("spec"), dict)]


class _Dumper(yaml.SafeDumper):
    """Block style, long strings unbroken, no anchors (a document repeats a template as text, never by alias)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


def to_yaml(doc: dict[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=10_000, allow_unicode=False)


def texts(plan: K8sPlan) -> dict[str, str]:
    """The files of the base, by path inside it."""
    header = "# Rendered by envkit k8s render from the lock; do not edit.\n"
    out = {rel: header + to_yaml(doc) for rel, doc in sorted(plan.files.items())}
    out["kustomization.yaml"] = header + to_yaml(plan.kustomization())
    out["README.md"] = plan.readme
    return out
