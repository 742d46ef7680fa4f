"""Kubernetes manifests from the lock: a kustomize base of plain data (dicts), rendered with a safe YAML dumper.

Part of the export layer (pure: no file is read, nothing is written). What a pod needs comes
from the lock through `ContainerFacts` (devices, mounts, environment, the device plugin's resource); the launch
(torchrun or Accelerate) and the HCCL environment from the same functions `envkit launch render` uses
(`envkit.export.launch`, `envkit.fleet.env`); the chip's node labels and the NPUs a pod may take from the lock's
`platform.kubernetes` (MindCluster's documented values, sourced in matrices/platform.yaml and copied by resolve).

Documents:
  smoke/<node>.yaml       one batch/v1 Job per named node: pinned to it, all its NPUs, `envkit smoke` on each NPU
                          (with `smoke_only`, these alone: no training or serving document)
  training/*.yaml         AscendJob (default) + its `rings-config-<job>` ConfigMap, or a Volcano Job (svc, env
                          plugins) + the same ConfigMap, or a Kubeflow PyTorchJob v1; the ConfigMap only for a chip
                          with an HCCL rank table format in the lock (none for 310P: one node, no rank table)
  serving/*.yaml          a vLLM Ascend server: a Deployment (one node) or a LeaderWorkerSet (several), and a Service;
                          the model from a read-only PVC or host directory (--model-pvc / --model-host-path)
Every container: CPU and memory (envkit's sizes per NPU), the image's non-root user, no privilege escalation, no
capabilities; hostPaths typed; `huawei.com/schedule_policy` where Volcano's Ascend plugin needs it; training pods
wait for the operator's rank table before the launcher starts.
  kustomization.yaml      the base (`kubectl kustomize DIR`)
Every value from the lock or the command line lands in a YAML string through the dumper (never a template), and a
shell line (LWS's Ray leader and worker scripts) quotes each word with `shlex.quote`.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import yaml

from envkit.errors import BadInput, Where
from envkit.export.container import ContainerFacts, container_facts
from envkit.export.launch import accelerate_config, torchrun_argv, train_script
from envkit.models.lock import HcclFacts, Lock

ENGINES = ("ascendjob", "volcano", "pytorchjob")
SCHEDULERS = ("volcano", "default")
LAUNCHERS = ("torchrun", "accelerate")
CONTAINER = {"ascendjob": "ascend", "volcano": "ascend", "pytorchjob": "pytorch"}  # the operators' rules
SERVING_CONTAINER = "ascend"
ASCENDJOB_PORT = ("ascendjob-port", 2222)  # MC: ascend_job.md ("do not modify" the name), constants.go DefaultPort
PYTORCHJOB_PORT = ("pytorchjob-port", 23456)  # training-operator release-1.9 pytorch_types.go
VOLCANO_PORT = ("rendezvous", 29500)  # torchrun's default; the svc plugin opens every port of the headless service
SERVE_PORT = 8000
RAY_PORT = 6379  # `ray start --head`'s default GCS port, the one vllm-ascend's guide joins ('{head_node_ip}:6379')
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

# MindCluster's Volcano plugin picks its scheduling handler from the job's `huawei.com/schedule_policy` annotation
# (it also reads the key from a pod's annotations). A `huawei.com/npu` (950 family) request without one gets no
# handler, so its pods get no NPUs: ascend-for-volcano internal/npu/factory.go `get910CardHandlerName`; the key in
# plugin/type.go `annotationKeysForPodGroup`. The values by hardware form: MC docs/en/scheduling/api/volcano.md
# Table 3 and, for the 950 family, docs/zh/scheduling/04_usage/03_basic_scheduling/07_Intergenerational_upgrade.md
# Table 1 (which states no default). 910B and A3 jobs may name one (without it the plugin goes by accelerator-type
# and sp-block); a 310P job's handler never reads it (factory.go `init310PCardPolicyHandler`).
SCHEDULE_POLICY_KEY = "huawei.com/schedule_policy"
SCHEDULE_POLICY_RESOURCE = "huawei.com/npu"
SCHEDULE_POLICIES: dict[str, dict[str, str]] = {
    "910b": {
        "chip8-node8": "8 NPUs per node on one ring (Atlas 800T A2)",
        "chip8-node16": "16 NPUs per node, rings of 8 (Atlas 200T A2 Box16)",
    },
    "a3": {
        "chip2-node16": "16 NPUs per node, rings of 2 (Atlas 800T A3)",
        "chip2-node16-sp": "16 NPUs per node, rings of 2, a SuperPoD (Atlas 900 A3 SuperPoD)",
        "chip2-node8": "8 NPUs per node, rings of 2",
        "chip2-node8-sp": "8 NPUs per node, rings of 2, a SuperPoD (Atlas 9000 A3 SuperPoD)",
    },
    "950": {
        "chip1-node8": "Atlas 350 cards, 8 per node, no UB interconnect",
        "chip1-node16": "Atlas 350 cards, 16 per node, no UB interconnect",
        "chip4-node8": "Atlas 350 cards, 8 per node, UB-linked in fours",
        "chip4-node16": "Atlas 350 cards, 16 per node, UB-linked in fours",
        "chip8-node8": "Atlas 850 series, not a SuperPoD",
        "chip8-node8-sp": "Atlas 850 SuperPoD",
        "chip8-node8-ra64-sp": "Atlas 950 SuperPoD",
    },
}
# The 950 family's accelerator-type labels and their policies (ascend-for-volcano common/util/constants.go comments;
# 850-Atlas-8p-8, the non-SuperPoD 850: the upgrade guide above). Only a hint in the message: no default is documented.
POLICY_OF_ACCELERATOR_TYPE = {
    "350-Atlas-8": "chip1-node8",
    "350-Atlas-16": "chip1-node16",
    "350-Atlas-4p-8": "chip4-node8",
    "350-Atlas-4p-16": "chip4-node16",
    "850-Atlas-8p-8": "chip8-node8",
    "850-SuperPod-Atlas-8": "chip8-node8-sp",
    "950-SuperPod-Atlas-8": "chip8-node8-ra64-sp",
}

# The image's user: `HwHiAiUser`, uid and gid 1000 (images/Dockerfile.j2 build args). Its USER is a name, so a pod
# that asks for runAsNonRoot must name the number (the kubelet cannot check a name).
RUN_AS = (1000, 1000)
MAX_ID = 2**31 - 1
# What each NPU container asks for besides its NPUs: envkit's choice (no vendor states one), per NPU of the pod.
# The only vendor figure, vllm-ascend's Kthena example, gives a 4-NPU server cpu 8 and 64Gi; training's data loaders
# and /dev/shm (memory-backed, counted against the limit) take more, so envkit doubles it. --cpu / --memory override.
CPU_PER_NPU = 4
MEMORY_GI_PER_NPU = 32
_CPU = re.compile(r"^(?:([0-9]{1,7})(m?)|([0-9]{1,4})\.([0-9]{1,3}))$")
_MEMORY = re.compile(r"^([0-9]{1,14})(Ki|Mi|Gi|Ti|k|M|G|T)?$")
_MEMORY_UNITS = {None: 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}
CPU_RANGE_M = (100, 1024 * 1000)  # 100m to 1024 cores
MEMORY_RANGE = (2**30, 64 * 2**40)  # 1Gi (an NPU container imports torch and CANN) to 64Ti
# hostPath types of the driver mounts (`ContainerFacts.mounts`): a path that is not what the type says is a
# failed mount, not an empty directory the kubelet creates. The devices themselves (/dev/davinciN, CharDevice)
# come from the device plugin and the Ascend Docker Runtime, never a hostPath.
HOST_PATH_TYPES = {
    "/usr/local/Ascend/driver": "Directory",
    "/usr/local/Ascend/driver/lib64": "Directory",
    "/usr/local/Ascend/driver/version.info": "File",
    "/usr/local/Ascend/driver/tools/hccn_tool": "File",
    "/usr/local/dcmi": "Directory",
    "/usr/local/bin/npu-smi": "File",
    "/etc/ascend_install.info": "File",
}
# The served model's volume: mounted read-only at /models/<name> unless --model-mount says where.
MODEL_VOLUME = "model"
MODEL_DIR = "/models"
_PATH = re.compile(r"^(/[A-Za-z0-9._+-]+)+$")
_RESERVED = (
    *("/bin", "/boot", "/dev", "/etc", "/lib", "/lib64", "/opt/envkit", "/proc", "/root", "/run", "/sbin", "/sys"),
    *("/tmp", "/usr", "/var", "/user/serverid"),
)
# Training waits for the rank table: the ConfigMap starts as {"status":"initializing"} and the Ascend Operator writes
# it (status "completed", server_list) once the job's pods are placed (MC docs/en/scheduling/api/hccl.json_file_description.md;
# MindCluster's launch scripts wait for "completed": "status of ranktable is not completed, waiting for file update",
# docs/en/faultdiag/user_guide/03_collecting_logs.md). The pod polls the mounted file (the kubelet swaps a
# ConfigMap volume's files on update, so each poll opens it anew) and execs the launcher; past the deadline it exits
# 1 saying so. No `$` in it: the kubelet expands `$(VAR)` and `$$` in a container's command.
# Only a chip the lock gives an HCCL rank table format (`platform.hccl.rank_table`, matrices/hccl.yaml) gets the
# ConfigMap, the mount and the wait. 310P has none, and MindCluster's operator would not fill one everywhere: it writes
# a table for any AscendJob (any `ring-controller.atlas` value: ascend-operator pkg/ranktable/plugins.go, factory.go)
# but only from the pods' `ascend.kubectl.kubernetes.io/ascend-910-configuration` annotation (pkg/ranktable/utils/
# util.go `PodHasAllocated`), which the device plugin writes for a 310P pod only where every card of the node is an
# Atlas 300I Duo (ascend-device-plugin pkg/device/ascendcommon.go `AddPodAnnotation`, `IsContainAll300IDuo`); on a
# 300I Pro or 300V Pro node the pod would wait out the timeout. A 310P job is one node (no format, no training across
# nodes), where torch_npu's HCCL starts from torchrun's environment (MC 03_full_npu...training.md: the "environment
# variable" mode needs no ConfigMap). Were a 310P row added to matrices/hccl.yaml, its pods would also need the
# 300I Duo node label (`infer-card-type: card-300i-duo`, ascend-common api/default_name.go `A300IDuoLabel`).
RANK_TABLE_TIMEOUT = 600
RANK_TABLE_TIMEOUT_RANGE = (1, 86400)
WAIT_RANK_TABLE = """\
import json, os, sys, time
path, limit, argv = sys.argv[1], float(sys.argv[2]), sys.argv[3:]
deadline = time.monotonic() + limit
status = None
print("envkit: waiting up to %g s for the rank table %s" % (limit, path), file=sys.stderr, flush=True)
while True:
    try:
        with open(path, encoding="utf-8") as f:
            status = json.load(f).get("status")
    except (OSError, ValueError, AttributeError) as exc:
        status = "unreadable (%s)" % type(exc).__name__
    if status == "completed":
        break
    if time.monotonic() >= deadline:
        print("envkit: the rank table %s is not completed after %g s (status: %s): the Ascend Operator writes it "
              "once every pod of the job is scheduled; see its log and the rings-config ConfigMap" % (path, limit, status),
              file=sys.stderr, flush=True)
        sys.exit(1)
    time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
print("envkit: rank table completed; starting %s" % argv[0], file=sys.stderr, flush=True)
try:
    os.execvp(argv[0], argv)
except OSError as exc:
    print("envkit: cannot run %s: %s" % (argv[0], exc), file=sys.stderr, flush=True)
    sys.exit(127)
"""


# Multi-node serving is vllm-ascend's Ray way: "Ray Distributed" (docs/source/tutorials/features/ray.md, before that
# tutorials/multi_node_ray.md, vllm-project/vllm-ascend): every node exports HCCL_IF_IP={local_ip},
# GLOO_SOCKET_IFNAME and TP_SOCKET_IFNAME={nic_name}, RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1 and
# ASCEND_RT_VISIBLE_DEVICES=0,1,...; the head runs `ray start --head`, each worker `ray start
# --address='{head_node_ip}:6379' --node-ip-address={local_ip}`; once `ray status` shows every node, one node runs
# `vllm serve ... --distributed-executor-backend ray --tensor-parallel-size <NPUs per node> --pipeline-parallel-size
# <nodes>` ("the common practice"). Its other multi-node way (DP: `--data-parallel-address`, `--headless` workers,
# tutorials/multi_node.md) serves MoE models by data parallelism; envkit renders the Ray way, which serves any model
# with TP x PP. The environment must be set before `ray start` (the guide's note), so it is the pods' own.
# In a pod: HCCL_IF_IP is the pod's IP (fieldRef status.podIP, as vllm-ascend's Kthena example sets it), the NIC is
# --socket-ifname (default eth0: the pod's interface under the usual CNIs, and the Kthena example's
# HCCL/GLOO/TP_SOCKET_IFNAME=eth0), the head is the LWS leader (LWS_LEADER_ADDRESS, kubernetes-sigs/lws
# labels-annotations-and-environment-variables.md). The LWS pods of a group start together (startupPolicy
# LeaderCreated), so the leader waits until `ray status` counts LWS_GROUP_SIZE nodes (as the LWS vLLM example's
# multi-node-serving.sh does) and each worker retries joining with back-off; both give up after --ray-timeout seconds,
# exiting 1 with what they saw (a restarted pod recreates the group: restartPolicy RecreateGroupOnPodRestart).
# The scripts hold no `$(` and no `$$` (the kubelet would expand them in a container's command): backticks and `expr`.
RAY_TIMEOUT = 600
RAY_TIMEOUT_RANGE = (1, 86400)
RAY_BACKOFF_MAX = 30  # a worker's wait between two joins doubles from 1 s up to this
SOCKET_IFNAME = "eth0"
_IFNAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:-]{0,14}$")  # a Linux interface name (IFNAMSIZ 16, with the NUL)
RAY_PACKAGE = "ray"
# `ray status` prints one line per node, " 1 node_<id>", under "Active:" (and "Idle:" with the v2 autoscaler), before
# "Pending:"; the count is the sum of those lines' first field.
_RAY_NODES_AWK = "/^Pending:/{exit} /^ *[0-9]+ node_/{n+=$1} END{print n+0}"


def ray_leader_script(serve: list[str], timeout: int) -> str:
    """The LWS leader's command: the Ray head, a wait for LWS_GROUP_SIZE nodes (at most `timeout` s), then `serve`."""
    port, limit = str(RAY_PORT), str(int(timeout))
    q = shlex.quote
    return f"""\
set -u
size="${{LWS_GROUP_SIZE:?is set by LeaderWorkerSet}}"
limit={q(limit)}
echo "envkit: starting the Ray head on port {port}; waiting up to $limit s for $size Ray nodes (LWS_GROUP_SIZE)" >&2
ray start --head --port={q(port)} --node-ip-address="$HCCL_IF_IP" || {{
  echo "envkit: ray start --head failed (see above); vLLM is not started" >&2
  exit 1
}}
start=`date +%s`
while :; do
  joined=`ray status 2>/dev/null | awk {q(_RAY_NODES_AWK)}`
  if [ "$joined" -ge "$size" ]; then
    break
  fi
  now=`date +%s`
  elapsed=`expr "$now" - "$start"`
  if [ "$elapsed" -ge "$limit" ]; then
    echo "envkit: $joined of $size Ray nodes joined the head within $limit s (--ray-timeout): see the worker pods' logs (they join LWS_LEADER_ADDRESS:{port}); vLLM is not started" >&2
    ray stop >/dev/null 2>&1
    exit 1
  fi
  echo "envkit: $joined of $size Ray nodes joined; waiting" >&2
  left=`expr "$limit" - "$elapsed"`
  if [ "$left" -gt 5 ]; then
    left=5
  fi
  sleep "$left"
done
echo "envkit: all $size Ray nodes joined; starting vLLM" >&2
exec {shlex.join(serve)}
"""


def ray_worker_script(timeout: int) -> str:
    """An LWS worker's command: join the leader's Ray head, retrying with back-off (1 s doubling to RAY_BACKOFF_MAX)
    for at most `timeout` s, then block as a Ray node (`ray start --block` returns when the node's processes end)."""
    port, limit = str(RAY_PORT), str(int(timeout))
    q = shlex.quote
    return f"""\
set -u
leader="${{LWS_LEADER_ADDRESS:?is set by LeaderWorkerSet}}"
limit={q(limit)}
start=`date +%s`
attempt=1
delay=1
while :; do
  echo "envkit: joining the Ray head at $leader:{port} (attempt $attempt)" >&2
  if ray start --address="$leader:"{q(port)} --node-ip-address="$HCCL_IF_IP" --block; then
    exit 0
  fi
  now=`date +%s`
  elapsed=`expr "$now" - "$start"`
  if [ "$elapsed" -ge "$limit" ]; then
    echo "envkit: could not join the Ray head at $leader:{port} in $attempt attempts within $limit s (--ray-timeout): see the leader pod's log" >&2
    exit 1
  fi
  left=`expr "$limit" - "$elapsed"`
  if [ "$delay" -gt "$left" ]; then
    delay="$left"
  fi
  echo "envkit: the Ray head is not reachable yet; retrying in $delay s" >&2
  sleep "$delay"
  attempt=`expr "$attempt" + 1`
  delay=`expr "$delay" \\* 2`
  if [ "$delay" -gt {RAY_BACKOFF_MAX} ]; then
    delay={RAY_BACKOFF_MAX}
  fi
done
"""


def _canonical(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def ray_in_lock(lock: Lock) -> str | None:
    """Where the lock holds Ray: "python.closure" (what `envkit lock` resolved: the packages the image installs) or,
    before `envkit lock`, "python.requirements" (the pins its closure is resolved from); None where it holds none."""
    closure = lock.python.closure
    if closure is not None:
        return "python.closure" if any(_canonical(p.name) == RAY_PACKAGE for p in closure.packages) else None
    if any(_canonical(p.name) == RAY_PACKAGE for p in lock.python.requirements):
        return "python.requirements"
    return None


def _multi_node_resolve(lock: Lock) -> str:
    """The command that resolves this lock's stack again with Ray: its hardware and vllm-ascend kept."""
    s = lock.stack
    argv = ["envkit", "resolve", "--chip", s.chip, "--arch", s.arch, "--os", s.os]
    if s.vllm_ascend:
        argv += ["--vllm-ascend", s.vllm_ascend]
    return shlex.join([*argv, "--workload", "serving-multi-node", "-o", "serving-multi-node.lock"])


def _require_ray(lock: Lock, nodes: int) -> None:
    if ray_in_lock(lock) is not None:
        return
    where = "python.closure" if lock.python.closure is not None else "python.requirements"
    raise _bad(
        f"serving on {nodes} nodes starts a Ray cluster, but the serving lock lacks ray ({where} holds no `ray`): "
        "vllm-ascend's multi-node way runs `ray start` on every node and `vllm serve --distributed-executor-backend "
        "ray`, and the image installs only what the lock pins",
        "Serve on one node (--node-count 1: no Ray), or render from a serving lock that pins ray: "
        f"`{_multi_node_resolve(lock)}` pins the Ray matrices/serving.yaml (`ray`) gives its vllm-ascend, then "
        "`envkit lock` puts it in the closure and `envkit image build` in the image.",
        where,
    )


@dataclass(frozen=True)
class ChipK8s:
    """What the plan reads of the lock's platform for its chip, read once (`chip_k8s`): `platform.kubernetes` as the
    plan uses it (NPU counts as numbers, the sources as one line), the NPUs of a node and the HCCL facts. Past
    `plan_k8s`, the manifests are made from this, `ContainerFacts` and the options; not from the lock."""

    chip: str
    accelerator: str
    accelerator_type: dict[int, str]
    host_arch: str | None
    ring_controller: str
    pod_npus: tuple[int, ...]
    multi_node_pod_npus: tuple[int, ...]
    sp_block: int | None
    source: str
    davinci_devices: int | None  # the lock's platform.davinci_devices (None: it depends on the cards installed)
    hccl: HcclFacts  # the lock's platform.hccl (the rules `envkit.fleet.env` applies, the rank table format)


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
        davinci_devices=lock.platform.davinci_devices,
        hccl=lock.platform.hccl,
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
    model: str | None = None  # None: the model volume's mount path, else /models/model
    accelerator_type: str | None = None
    super_pod: bool | None = None  # None: on where the chip has a SuperPoD block (a3)
    queue: str = "default"
    hccl: tuple[tuple[str, str], ...] = ()
    kube_version: str = "1.30"
    schedule_policy: str | None = None
    rank_table_timeout: int = RANK_TABLE_TIMEOUT
    smoke_only: bool = False  # the per-node smoke Jobs alone: no training or serving document
    model_pvc: str | None = None
    model_host_path: str | None = None
    model_mount: str | None = None
    cpu: str | None = None  # None: CPU_PER_NPU per NPU of the pod
    memory: str | None = None  # None: MEMORY_GI_PER_NPU Gi per NPU of the pod
    run_as: tuple[int, int] = RUN_AS
    socket_ifname: str = SOCKET_IFNAME  # GLOO/TP_SOCKET_IFNAME of serving across nodes, HCCL_SOCKET_IFNAME's default
    ray_timeout: int = RAY_TIMEOUT  # serving across nodes: the leader's wait for its nodes, each worker's joining


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
    schedule_policy: str | None = None
    smoke_npus: int = 0
    smoke_only: bool = False
    rank_table: bool = False  # training reads the operator's rank table (and waits for it)
    model: str | None = None  # serving: what vllm serve loads
    model_volume: dict[str, Any] | None = None  # serving: the model's volume (PVC or hostPath), None: none mounted
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


def _bad(message: str, hint: str, key: str | None = None) -> BadInput:
    return BadInput(message, where=Where(None, None, key) if key else None, hint=hint)


def _check_options(chip: str, opts: K8sOptions) -> None:
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
            f"the lock records no image reference for chip {chip}, and no --image was given",
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
    if opts.smoke_only and not opts.nodes:
        raise _bad(
            "--smoke-only without node names: each smoke Job is pinned to a node by its name",
            "Name the nodes: --node NAME, repeated (as `kubectl get nodes` prints them).",
        )
    if opts.smoke_only and (opts.model_pvc or opts.model_host_path or opts.model):
        raise _bad(
            "--smoke-only with a model: the smoke Jobs serve none", "Leave out --model, --model-pvc and --model-host-path."
        )
    count = len(opts.nodes) or (opts.node_count or 0)
    if not 1 <= count <= MAX_NODES:
        raise _bad(f"--node-count {count}: 1 to {MAX_NODES}", "One pod per node.")
    try:
        train_script(opts.script, Where(None, None, "--script"))
    except BadInput as exc:
        raise _bad(f"--script {opts.script[:80]!r} is not a plain script path", exc.hint or "", "--script") from None
    if opts.model is not None and (not opts.model or len(opts.model) > 1024 or any(c in opts.model for c in "\x00\n\r")):
        raise _bad(f"--model {opts.model[:80]!r} is not a model name or path", "A Hugging Face id or a path in the pod.")
    lo, hi = RANK_TABLE_TIMEOUT_RANGE
    if not lo <= opts.rank_table_timeout <= hi:
        raise _bad(
            f"--rank-table-timeout {opts.rank_table_timeout}: {lo} to {hi} seconds",
            f"How long a training pod waits for the Ascend Operator's rank table (default {RANK_TABLE_TIMEOUT}).",
        )
    lo, hi = RAY_TIMEOUT_RANGE
    if not lo <= opts.ray_timeout <= hi:
        raise _bad(
            f"--ray-timeout {opts.ray_timeout}: {lo} to {hi} seconds",
            f"How long the serving leader waits for its Ray nodes, and each worker tries to join it (default {RAY_TIMEOUT}).",
        )
    if not _IFNAME.fullmatch(opts.socket_ifname):
        raise _bad(
            f"--socket-ifname {opts.socket_ifname[:40]!r} is not a network interface name",
            f"The pods' interface, as `ip addr` in a pod shows it (default {SOCKET_IFNAME}): at most 15 letters, digits, "
            "'_', '.', ':' or '-'.",
        )
    if opts.cpu is not None:
        cpu_quantity(opts.cpu)
    if opts.memory is not None:
        memory_quantity(opts.memory)
    uid, gid = opts.run_as
    if not (1 <= uid <= MAX_ID and 0 <= gid <= MAX_ID):
        raise _bad(
            f"--run-as {uid}:{gid}: the user is 1 to {MAX_ID} (pods run as non-root), the group 0 to {MAX_ID}",
            f"The image's HwHiAiUser ids (images/Dockerfile.j2 build args, default {RUN_AS[0]}:{RUN_AS[1]}).",
        )
    _check_model_options(opts)


def cpu_quantity(text: str) -> int:
    """A CPU quantity (`8`, `500m`, `1.5`) in millicores, within CPU_RANGE_M; BadInput otherwise."""
    m = _CPU.fullmatch(text)
    lo, hi = CPU_RANGE_M
    if m is None:
        raise _bad(f"--cpu {text[:40]!r} is not a CPU quantity", "Cores (8, 1.5) or millicores (500m).")
    if m[1] is not None:
        milli = int(m[1]) if m[2] else int(m[1]) * 1000
    else:
        milli = int(m[3]) * 1000 + int(m[4].ljust(3, "0"))
    if not lo <= milli <= hi:
        raise _bad(f"--cpu {text}: {lo}m to {hi // 1000} cores", "The CPU request of every NPU container.")
    return milli


def memory_quantity(text: str) -> int:
    """A memory quantity (`256Gi`, `64G`, bytes) in bytes, within MEMORY_RANGE; BadInput otherwise."""
    m = _MEMORY.fullmatch(text)
    lo, hi = MEMORY_RANGE
    if m is None:
        raise _bad(
            f"--memory {text[:40]!r} is not a memory quantity", "A number with Ki, Mi, Gi, Ti (or k, M, G, T), e.g. 256Gi."
        )
    size = int(m[1]) * _MEMORY_UNITS[m[2]]
    if not lo <= size <= hi:
        raise _bad(f"--memory {text}: 1Gi to 64Ti", "The memory request and limit of every NPU container.")
    return size


def _check_path(what: str, value: str) -> None:
    parts = value.split("/")[1:]
    if len(value) > 1024 or not _PATH.fullmatch(value) or any(p in (".", "..") or len(p) > 255 for p in parts):
        raise _bad(
            f"{what} {value[:80]!r} is not an absolute path",
            "An absolute path without '.' or '..' parts or a trailing '/': letters, digits and . _ + - in each part "
            "(at most 255), 1024 in all.",
        )


def _check_model_options(opts: K8sOptions) -> None:
    if opts.model_pvc is not None and opts.model_host_path is not None:
        raise _bad(
            "--model-pvc and --model-host-path together: the model comes from one volume",
            "A PersistentVolumeClaim (--model-pvc NAME) or a directory on every node (--model-host-path PATH).",
        )
    if opts.model_pvc is not None and (len(opts.model_pvc) > 63 or not _NAME.fullmatch(opts.model_pvc)):
        raise _bad(
            f"--model-pvc {opts.model_pvc[:80]!r} is not a PersistentVolumeClaim name",
            "Lower-case letters, digits and '-', at most 63, starting and ending with a letter or digit.",
        )
    if opts.model_host_path is not None:
        _check_path("--model-host-path", opts.model_host_path)
    if opts.model_mount is not None:
        if opts.model_pvc is None and opts.model_host_path is None:
            raise _bad("--model-mount without a model volume", "Give --model-pvc NAME or --model-host-path PATH with it.")
        _check_path("--model-mount", opts.model_mount)


def _model_mount(opts: K8sOptions) -> str | None:
    if opts.model_pvc is not None:
        return opts.model_mount or f"{MODEL_DIR}/{opts.model_pvc}"
    if opts.model_host_path is not None:
        return opts.model_mount or f"{MODEL_DIR}/{opts.model_host_path.rsplit('/', 1)[-1]}"
    return None


def _under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")


def _model_volume(opts: K8sOptions, serving: bool, taken: list[str]) -> tuple[str, dict[str, Any]] | None:
    """The served model's mount path and read-only volume (PVC or a hostPath directory), or None."""
    mount = _model_mount(opts)
    if mount is None:
        return None
    if not serving:
        raise _bad(
            "--model-pvc / --model-host-path mount the served model: this base trains",
            "Serve (a serving lock, or --serving), or put the training data in the image or your own volume.",
        )
    for other in (*_RESERVED, *taken):
        if _under(mount, other) or _under(other, mount):
            raise _bad(
                f"the model's mount path {mount} overlaps {other}",
                f"Mount it elsewhere: --model-mount {MODEL_DIR}/NAME.",
            )
    if opts.model_pvc is not None:
        volume: dict[str, Any] = {"name": MODEL_VOLUME, "persistentVolumeClaim": {"claimName": opts.model_pvc, "readOnly": True}}
    else:
        volume = {"name": MODEL_VOLUME, "hostPath": {"path": opts.model_host_path, "type": "Directory"}}
    return mount, volume


def _served_model(opts: K8sOptions, mount: str | None) -> str:
    if mount is None:
        return opts.model or "/models/model"
    if opts.model is None:
        return mount
    if not _under(opts.model, mount):
        raise _bad(
            f"--model {opts.model[:80]!r} is not in the model volume mounted at {mount}",
            f"Leave --model out (vLLM loads {mount}) or name a directory in it: --model {mount}/NAME.",
        )
    return opts.model


def _schedule_policy(chip: str, opts: K8sOptions, resource: str) -> str | None:
    """The `huawei.com/schedule_policy` annotation: required for a `huawei.com/npu` job under Volcano (no default is
    documented), optional for 910B and A3, refused where MindCluster's Volcano plugin does not read it."""
    values = SCHEDULE_POLICIES.get(chip)
    given = opts.schedule_policy
    listed = "; ".join(f"{k} ({v})" for k, v in (values or {}).items())
    if given is not None:
        if opts.scheduler != "volcano":
            raise _bad(
                f"--schedule-policy with --scheduler {opts.scheduler}: only Volcano's Ascend plugin reads it",
                "Leave it out, or schedule with Volcano (--scheduler volcano).",
            )
        if values is None:
            raise _bad(
                f"--schedule-policy: MindCluster's Volcano plugin reads no scheduling policy for chip {chip}",
                "Leave it out: the plugin places these pods by the node's accelerator-type label.",
            )
        if given not in values:
            raise _bad(f"--schedule-policy {given[:40]!r} is not a {chip} policy MindCluster documents", f"One of: {listed}.")
        return given
    if resource == SCHEDULE_POLICY_RESOURCE and opts.scheduler == "volcano":
        hint = POLICY_OF_ACCELERATOR_TYPE.get(opts.accelerator_type or "")
        raise _bad(
            f"a {resource} job under Volcano needs --schedule-policy: MindCluster's plugin places no {resource} pod "
            "without one, and documents no default",
            (f"For --accelerator-type {opts.accelerator_type}: --schedule-policy {hint}. " if hint else "")
            + f"By the nodes' hardware: {listed or ', '.join(sorted(POLICY_OF_ACCELERATOR_TYPE.values()))}.",
        )
    return None


def _npus(opts: K8sOptions, chip: ChipK8s, resource: str, nodes: int, training: bool) -> int:
    davinci = chip.davinci_devices
    npn = opts.npus_per_node if opts.npus_per_node is not None else davinci
    if npn is None:
        raise _bad(
            f"the NPUs of a {chip.chip} node depend on the cards installed",
            f"Pass --npus-per-node N (what the device plugin advertises: `kubectl describe node NODE | grep {resource}`).",
        )
    if npn not in chip.pod_npus or (davinci is not None and npn > davinci and npn not in chip.accelerator_type):
        allowed = [n for n in chip.pod_npus if davinci is None or n <= davinci or n in chip.accelerator_type]
        raise _bad(
            f"--npus-per-node {npn}: a {chip.chip} pod takes {', '.join(map(str, allowed))} NPUs",
            f"Source: {chip.source}",
        )
    if nodes > 1 and training:
        if not chip.multi_node_pod_npus or chip.hccl.rank_table is None:
            raise _bad(
                f"{nodes} nodes: chip {chip.chip} has no HCCL rank table format, so no training across nodes "
                f"(the lock's platform.hccl.rank_table is empty: matrices/hccl.yaml rank_tables has no {chip.chip} row)",
                "Render one node (--node-count 1), serve instead (--serving), or only the smoke Job of each named node "
                "(--smoke-only --node NAME ...).",
            )
        if npn not in chip.multi_node_pod_npus:
            raise _bad(
                f"{nodes} nodes x {npn} NPUs: a {chip.chip} job across nodes takes whole nodes "
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


def _hccl_env(chip: ChipK8s, opts: K8sOptions, nodes: int) -> dict[str, str]:
    """The HCCL block of the fleet layer (`envkit.fleet.env.uniform_env`, the rules the lock carries): every pod the same,
    the socket interface by name (a pod's IP is not known before it starts)."""
    from envkit.fleet.env import ORDER, uniform_env

    given = dict(opts.hccl)
    for key in given:
        if key not in ORDER:
            raise _bad(f"--hccl {key[:40]}=...: not an HCCL variable envkit checks", f"One of {', '.join(ORDER)}.")
    if "HCCL_IF_IP" in given:
        raise _bad(
            "--hccl HCCL_IF_IP: a pod's address is known only once it runs",
            f"Name the interface instead: --socket-ifname NAME (default {SOCKET_IFNAME}), or --hccl HCCL_SOCKET_IFNAME=NAME.",
        )
    given.setdefault("HCCL_SOCKET_IFNAME", opts.socket_ifname)
    return uniform_env(given, nodes, chip.chip, chip.hccl, "--hccl")


class _Pod:
    """What every pod template of the base shares, built once per plan."""

    def __init__(
        self,
        opts: K8sOptions,
        facts: ContainerFacts,
        chip: ChipK8s,
        resource: str,
        npn: int,
        schedule_policy: str | None = None,
    ) -> None:
        self.opts, self.facts, self.chip, self.resource, self.npn = opts, facts, chip, resource, npn
        self.schedule_policy = schedule_policy
        self.node_selector = self.selector(npn)

    def selector(self, npus: int) -> dict[str, str]:
        """The node labels of a pod taking `npus` NPUs (the accelerator-type default goes by the pod's size)."""
        selector: dict[str, str] = {"accelerator": self.chip.accelerator}
        if self.chip.host_arch:
            selector["host-arch"] = self.chip.host_arch
        acc_type = self.opts.accelerator_type or self.chip.accelerator_type.get(npus)
        if acc_type:
            selector["accelerator-type"] = acc_type
        return selector

    def annotations(self, extra: dict[str, str] | None = None) -> dict[str, str]:
        """A pod's or a job's annotations: the scheduling policy (when one is set) and `extra`."""
        out = dict(extra or {})
        if self.schedule_policy is not None:
            out[SCHEDULE_POLICY_KEY] = self.schedule_policy
        return out

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

    def resources(self, npus: int | None = None) -> dict[str, Any]:
        """NPUs (requests = limits), CPU and memory requests, and the memory limit (= request: an NPU container that
        outgrows it is killed rather than starving the node; CPU is not capped)."""
        n = self.npn if npus is None else npus
        cpu = self.opts.cpu or str(CPU_PER_NPU * n)
        memory = self.opts.memory or f"{MEMORY_GI_PER_NPU * n}Gi"
        return {
            "requests": {self.resource: n, "cpu": cpu, "memory": memory},
            "limits": {self.resource: n, "memory": memory},
        }

    def security(self) -> dict[str, Any]:
        """The image's user (HwHiAiUser, by number), no privilege escalation, no capabilities: the NPUs come as device
        nodes from the device plugin and the Ascend Docker Runtime, which no capability governs (MC
        docs/en/scheduling/references/security_hardening.md: run as a non-root user with only the capabilities
        needed)."""
        uid, gid = self.opts.run_as
        return {
            "allowPrivilegeEscalation": False,
            "capabilities": {"drop": ["ALL"]},
            "runAsGroup": gid,
            "runAsNonRoot": True,
            "runAsUser": uid,
        }

    def mounts(self) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
        mounts: list[dict[str, Any]] = [{"name": "dshm", "mountPath": "/dev/shm"}]
        volumes: list[dict[str, Any]] = [{"name": "dshm", "emptyDir": {"medium": "Memory"}}]
        for host, target, mode in self.facts.mounts:
            name = _volume_name(target)
            mounts.append({"name": name, "mountPath": target, "readOnly": mode == "ro"})
            host_path: dict[str, Any] = {"path": host}
            if host in HOST_PATH_TYPES:  # a path without a type is refused by the checks (k8s_check)
                host_path["type"] = HOST_PATH_TYPES[host]
            volumes.append({"name": name, "hostPath": host_path})
        return mounts, volumes

    def container(
        self, name: str, command: list[str], env: dict[str, str] | None = None, npus: int | None = None
    ) -> dict[str, Any]:
        mounts, _ = self.mounts()
        return {
            "name": name,
            "image": self.opts.image,
            "imagePullPolicy": "IfNotPresent",
            "command": command,
            "env": self.env(env),
            "resources": self.resources(npus),
            "securityContext": self.security(),
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
SMOKE_OUT = "/tmp/envkit-smoke"


def smoke_script(npus: int) -> str:
    """Every NPU of the node: `envkit smoke` runs its model checks on one device per process, so one run per NPU
    (`npu:0` .. `npu:N-1`, the pod's devices numbered from 0), the first with `--nproc N` (all_reduce and all_gather
    across the N NPUs, rank r on npu:r). Each prints its JSON report; the pod exits with the worst status (0 every
    check passed, 1 a check failed, 2 a run could not start)."""
    first = f"envkit smoke --device npu:0{f' --nproc {npus}' if npus > 1 else ''} --json --out {SMOKE_OUT}/npu0 || rc=$?"
    lines = ["rc=0", first]
    if npus > 1:
        rest = " ".join(str(i) for i in range(1, npus))
        lines.append(
            f"for i in {rest}; do envkit smoke --device npu:$i --json --out {SMOKE_OUT}/npu$i "
            "|| { s=$?; if [ $s -gt $rc ]; then rc=$s; fi; }; done"
        )
    lines.append("exit $rc")
    return "\n".join(lines) + "\n"


def _smoke(plan: K8sPlan, pod: _Pod, nodes: tuple[str, ...]) -> None:
    npus = plan.smoke_npus
    for node in nodes:
        name = f"{plan.name}-smoke-{node}"[:63].rstrip("-.").replace(".", "-")
        container = pod.container("ascend", ["/bin/sh", "-c", _Block(smoke_script(npus))], {"ENVKIT_NODE": node}, npus)
        spec = pod.spec([container], "Never")
        spec["nodeSelector"] = {**pod.selector(npus), "kubernetes.io/hostname": node}
        labels = {**_labels(plan, "smoke"), "envkit.io/job": name}
        tmeta: dict[str, Any] = {"labels": labels}
        if pod.annotations():
            tmeta["annotations"] = pod.annotations()
        plan.files[f"smoke/{node}.yaml"] = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": name, "namespace": plan.namespace, "labels": labels},
            "spec": {
                "backoffLimit": 0,
                "template": {"metadata": tmeta, "spec": spec},
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
    hccl = _hccl_env(pod.chip, opts, nodes)
    extra_volumes: list[dict[str, Any]] = []
    extra_mounts: list[dict[str, Any]] = []
    env = dict(hccl)
    if plan.rank_table:
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
    if plan.rank_table:
        command = wait_for_rank_table(command, opts.rank_table_timeout)
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
        meta: dict[str, Any] = {"labels": dict(pod_labels)}
        if pod.annotations():
            meta["annotations"] = pod.annotations()
        return {"metadata": meta, "spec": spec}

    annotations = pod.annotations({"sp-block": str(sp_block)} if sp_block is not None else None) or None
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


def wait_for_rank_table(command: list[str], timeout: int) -> list[str]:
    """`command`, started once the rank table is `completed` (WAIT_RANK_TABLE: poll, then exec; exit 1 past
    `timeout` seconds). The launcher's words stay words of the command, so the kubelet still expands `$(RANK)`."""
    return ["python3", "-c", _Block(WAIT_RANK_TABLE), f"{RANK_TABLE_DIR}/{RANK_TABLE_KEY}", str(timeout), *command]


def _master_workers(template: Callable[[], dict[str, Any]], nodes: int) -> dict[str, Any]:
    """The one Master and the Workers of an AscendJob's or a PyTorchJob's replica specs, never restarted."""
    replicas: dict[str, Any] = {"Master": {"replicas": 1, "restartPolicy": "Never", "template": template()}}
    if nodes > 1:
        replicas["Worker"] = {"replicas": nodes - 1, "restartPolicy": "Never", "template": template()}
    return replicas


# --- serving --------------------------------------------------------------------------------------------------------
def _probes(wait: int = 0) -> dict[str, Any]:
    """Readiness and liveness on /health; `wait`: seconds the container may spend before vLLM starts (the leader's
    wait for its Ray nodes), added to the liveness delay."""

    def get(delay: int, period: int, failures: int) -> dict[str, Any]:
        return {
            "httpGet": {"path": "/health", "port": SERVE_PORT},
            "initialDelaySeconds": delay,
            "periodSeconds": period,
            "failureThreshold": failures,
        }

    # vllm-ascend's Kthena example: readiness and liveness on /health:8000, liveness after 900 s (a model loads first)
    return {"readinessProbe": get(30, 10, 3), "livenessProbe": get(900 + wait, 30, 3)}


def _serve_argv(model: str, npn: int, nodes: int) -> list[str]:
    argv = ["vllm", "serve", model, "--host", "0.0.0.0", "--port", str(SERVE_PORT), "--tensor-parallel-size", str(npn)]
    if nodes > 1:
        argv += ["--pipeline-parallel-size", str(nodes), "--distributed-executor-backend", "ray"]
    return argv


# HCCL's interface by address (it outranks HCCL_SOCKET_IFNAME: hicann/hccl docs/en/user_guide/hccl_env/), and the address
# each Ray node registers (`--node-ip-address`): the pod's own IP, known once it runs.
POD_IP_ENV: dict[str, Any] = {"name": "HCCL_IF_IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}}


def ray_env(opts: K8sOptions, npn: int) -> dict[str, str]:
    """What vllm-ascend's Ray guide exports on every node before `ray start` (HCCL_IF_IP aside: POD_IP_ENV)."""
    return {
        "GLOO_SOCKET_IFNAME": opts.socket_ifname,
        "TP_SOCKET_IFNAME": opts.socket_ifname,
        "RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES": "1",
        "ASCEND_RT_VISIBLE_DEVICES": ",".join(str(i) for i in range(npn)),
    }


def _serving(plan: K8sPlan, pod: _Pod, opts: K8sOptions, nodes: int, sp_block: int | None) -> None:
    npn = plan.npus_per_node
    env = dict(pod.facts.serving_env)  # the serving image bakes the same block
    selector = {"app.kubernetes.io/name": plan.name, "app.kubernetes.io/component": "serving"}
    port = [{"name": "http", "containerPort": SERVE_PORT}]
    annotations = pod.annotations({"sp-block": str(sp_block)} if sp_block is not None else None) or None
    model = plan.model or "/models/model"
    model_volumes = [plan.model_volume] if plan.model_volume else []

    def with_model(container: dict[str, Any]) -> dict[str, Any]:
        if plan.model_volume:
            mount = {"name": MODEL_VOLUME, "mountPath": _model_mount(opts), "readOnly": True}
            container["volumeMounts"] = container["volumeMounts"] + [mount]
        return container

    if nodes == 1:
        container = with_model(pod.container(SERVING_CONTAINER, _serve_argv(model, npn, 1), env))
        container.update({"ports": port, **_probes()})
        spec = pod.spec([container], "Always", model_volumes)
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
        env.update(_hccl_env(pod.chip, opts, nodes))
        env.update(ray_env(opts, npn))
        leader_sh = _Block(ray_leader_script(_serve_argv(model, npn, nodes), opts.ray_timeout))
        worker_sh = _Block(ray_worker_script(opts.ray_timeout))
        leader = with_model(pod.container(SERVING_CONTAINER, ["/bin/sh", "-c", leader_sh], env))
        leader.update({"ports": port, **_probes(opts.ray_timeout)})
        worker = with_model(pod.container(SERVING_CONTAINER, ["/bin/sh", "-c", worker_sh], env))
        for c in (leader, worker):
            c["env"].append(POD_IP_ENV)

        def template(role: str, container: dict[str, Any]) -> dict[str, Any]:
            spec = pod.spec([container], "Always", model_volumes)
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
    _check_options(lock.stack.chip, opts)
    chip = chip_k8s(lock)
    serving_lock = lock.stack.vllm_ascend is not None
    serving = serving_lock if opts.serving is None else opts.serving
    if serving and not serving_lock:
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
    npn = _npus(opts, chip, resource, nodes, training=not serving and not opts.smoke_only)
    sp_block = _super_pod(opts, chip, npn)
    schedule_policy = _schedule_policy(chip.chip, opts, resource)
    davinci = chip.davinci_devices
    devices = f"0-{npn - 1}" if davinci is None or npn <= davinci else None
    facts = container_facts(lock, devices, "serving" if serving else "base")
    # the smoke Job tests the whole node: the lock's NPUs per node, or the pod's where a node holds more (16-NPU
    # 910B servers) or the lock cannot say (310P cards)
    smoke_npus = npn if davinci is None or npn > davinci else davinci
    taken = ["/dev/shm", RANK_TABLE_DIR, LAUNCH_DIR, *(target for _host, target, _mode in facts.mounts)]
    model_volume = _model_volume(opts, serving, taken)
    model = _served_model(opts, model_volume[0] if model_volume else None) if serving else None
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
        schedule_policy=schedule_policy,
        smoke_npus=smoke_npus,
        smoke_only=opts.smoke_only,
        rank_table=not serving
        and not opts.smoke_only
        and opts.engine in ("ascendjob", "volcano")
        and chip.hccl.rank_table is not None,
        model=model,
        model_volume=model_volume[1] if model_volume else None,
    )
    pod = _Pod(opts, facts, chip, resource, npn, schedule_policy)
    plan.node_labels = dict(pod.node_selector)
    _smoke(plan, pod, opts.nodes)
    if serving and not opts.smoke_only:
        if nodes > 1:
            _require_ray(lock, nodes)
        _serving(plan, pod, opts, nodes, sp_block)
    elif not opts.smoke_only:
        _training(plan, pod, opts, chip, nodes, sp_block)
        if opts.engine != "pytorchjob" and not plan.rank_table:
            plan.notes.append(
                f"no rank table: chip {plan.chip} has no HCCL rank table format in the lock, so no rings-config ConfigMap "
                f"and no wait; the job runs on one node and HCCL starts from {opts.launcher}'s environment"
            )
    if not opts.nodes:
        plan.notes.append("no --node names: the per-node smoke Jobs are not rendered (they are pinned by node name)")
    elif smoke_npus != npn:
        plan.notes.append(f"the smoke Jobs take all {smoke_npus} NPUs of their node; the other pods take {npn}")
    if opts.model_pvc is not None and serving and nodes > 1:
        plan.notes.append(
            f"--model-pvc {opts.model_pvc}: {nodes} pods on {nodes} nodes mount it, so its access mode must be ReadOnlyMany"
        )
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
        f"# Kubernetes base for chip {plan.chip}: smoke per node" + ("" if plan.smoke_only else f" and {workload}"),
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
    if plan.schedule_policy is not None:
        lines.append(
            f"- Volcano scheduling policy: annotation `{SCHEDULE_POLICY_KEY}: {plan.schedule_policy}` on the jobs and every pod"
        )
    uid, gid = opts.run_as
    cpu = opts.cpu or f"{CPU_PER_NPU} per NPU"
    memory = opts.memory or f"{MEMORY_GI_PER_NPU}Gi per NPU"
    lines += [
        f"- every container: cpu {cpu} (request), memory {memory} (request = limit; `/dev/shm` counts against it);",
        f"  envkit's sizes, not a vendor's (`--cpu`, `--memory`); runs as {uid}:{gid} (the image's HwHiAiUser, `--run-as`),",
        "  non-root, no privilege escalation, every capability dropped; driver hostPaths typed (Directory, File)",
    ]
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
            *(
                [
                    f"One Job per node takes its {plan.smoke_npus} NPUs and runs `envkit smoke` on each: `--device npu:0` with",
                    f"`--nproc {plan.smoke_npus}` (collectives across all of them), then `npu:1` and on. Its log holds one JSON",
                    "report per NPU (exit 0 = every check passed on every NPU).",
                ]
                if plan.smoke_npus > 1
                else ["One Job per node takes its NPU and runs `envkit smoke --device npu:0`; its log is the JSON report."]
            ),
            "",
            "```sh",
            f"kubectl -n {plan.namespace} get jobs -l app.kubernetes.io/component=smoke",
            f"kubectl -n {plan.namespace} logs job/{plan.name}-smoke-NODE | jq -s . > NODE.json",
            "```",
            "",
        ]
    if plan.serving and not plan.smoke_only:
        lines += [
            "## Serving",
            "",
            f"vLLM Ascend serves `{plan.model}` on port {SERVE_PORT} (`/health` for readiness and liveness),",
            _model_source(opts) if plan.model_volume else "no model volume mounted (put it in the image, or --model-pvc NAME):",
            "",
            "```sh",
            f"kubectl -n {plan.namespace} port-forward svc/{plan.name}{'-leader' if plan.node_count > 1 else ''} {SERVE_PORT}:{SERVE_PORT}",
            f"curl -s localhost:{SERVE_PORT}/v1/models",
            "```",
            "",
        ]
        if plan.node_count > 1:
            lines += [
                f"Across {plan.node_count} nodes vLLM runs on Ray (vllm-ascend's Ray guide, `--distributed-executor-backend ray`,",
                f"tensor parallel {plan.npus_per_node} x pipeline parallel {plan.node_count}): the LeaderWorkerSet leader starts the Ray head,",
                "waits until `ray status` counts LWS_GROUP_SIZE nodes and only then starts vLLM; each worker joins",
                f"LWS_LEADER_ADDRESS:{RAY_PORT}, retrying with back-off. Both give up after {opts.ray_timeout} s (`--ray-timeout`) and",
                "exit 1 saying why. Every pod sets HCCL_IF_IP (its IP), GLOO_SOCKET_IFNAME, TP_SOCKET_IFNAME and",
                f"HCCL_SOCKET_IFNAME (`{opts.socket_ifname}`, `--socket-ifname`), RAY_EXPERIMENTAL_NOSET_ASCEND_RT_VISIBLE_DEVICES=1",
                "and ASCEND_RT_VISIBLE_DEVICES, as the guide exports them before `ray start`.",
                "",
            ]
    elif not plan.smoke_only:
        lines += [
            "## Training",
            "",
            f"The job runs `{opts.launcher}` on `{opts.script}` in every pod (one pod per node, {plan.npus_per_node} processes each);",
            "put the script in the image or mount it. " + _training_readme(plan, opts),
            "",
        ]
    if plan.notes:
        lines += ["## Notes", ""] + [f"- {n}" for n in plan.notes] + [""]
    return "\n".join(lines)


def _training_readme(plan: K8sPlan, opts: K8sOptions) -> str:
    if plan.engine == "pytorchjob":
        return "PyTorchJob sets MASTER_ADDR, MASTER_PORT and RANK."
    if not plan.rank_table:
        return f"No rank table is mounted or waited for (chip {plan.chip}: see the notes)."
    return (
        "HCCL reads the rank table the Ascend Operator writes into the\n"
        f"`rings-config-{plan.name}` ConfigMap (RANK_TABLE_FILE); each pod waits until its status is `completed`\n"
        f"(at most {opts.rank_table_timeout} s, `--rank-table-timeout`, then exits 1 saying so) and only then starts {opts.launcher}."
    )


def _model_source(opts: K8sOptions) -> str:
    mount = _model_mount(opts)
    if opts.model_pvc is not None:
        return f"from the PersistentVolumeClaim `{opts.model_pvc}` mounted read-only at `{mount}`:"
    return f"from the nodes' directory `{opts.model_host_path}` mounted read-only at `{mount}`:"


def pod_specs(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod spec a document holds (a Job's, a Deployment's, each replica's or task's, LWS's two)."""
    return [t["spec"] for t in pod_templates(doc)]


def pod_templates(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """Every pod template (metadata and spec) a document holds."""
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
    return [t for t in templates if isinstance(t, dict) and isinstance(t.get("spec"), dict)]


class _Dumper(yaml.SafeDumper):
    """Block style, long strings unbroken, no anchors (a document repeats a template as text, never by alias)."""

    def ignore_aliases(self, data: Any) -> bool:
        return True


class _Block(str):
    """A multi-line script in a command: dumped as a YAML literal block (`|`), read back as a plain string."""


def _block(dumper: yaml.SafeDumper, data: _Block) -> yaml.ScalarNode:
    return dumper.represent_scalar("tag:yaml.org,2002:str", str(data), style="|")


_Dumper.add_representer(_Block, _block)


def to_yaml(doc: dict[str, Any]) -> str:
    return yaml.dump(doc, Dumper=_Dumper, sort_keys=True, default_flow_style=False, width=10_000, allow_unicode=False)


def texts(plan: K8sPlan) -> dict[str, str]:
    """The files of the base, by path inside it."""
    header = "# Rendered by envkit k8s render from the lock; do not edit.\n"
    out = {rel: header + to_yaml(doc) for rel, doc in sorted(plan.files.items())}
    out["kustomization.yaml"] = header + to_yaml(plan.kustomization())
    out["README.md"] = plan.readme
    return out
