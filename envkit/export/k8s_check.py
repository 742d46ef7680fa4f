"""Every Kubernetes document envkit renders is checked before it is written, three ways:

1. core kinds (batch/v1 Job, ConfigMap, Deployment, Service, ...) against the upstream Kubernetes OpenAPI schemas that
   the `kubernetes-validate` package bundles (strict: unknown fields refused; offline);
2. custom resources (AscendJob, Volcano Job, PyTorchJob, LeaderWorkerSet) against their upstream CRDs'
   openAPIV3Schema vendored in envkit/data/k8s/crds/ (source repo, path and commit in each file), with
   `additionalProperties: false` added to every object that lists its properties, the pod templates checked against
   the same strict core schemas;
3. envkit's own rules, which no schema holds: NPU requests equal limits; an AscendJob has the `framework` label, one
   Master and the container `ascend` with port `ascendjob-port`; a PyTorchJob's container is `pytorch`; no DaemonSet
   (a one-shot NPU job cannot be one: its pods may only restart Always, and it would hold the NPUs); one-shot pods
   never restart; every container runs the one image, digest-pinned where one was given; ASCEND_VISIBLE_DEVICES reads
   the annotation named like the requested resource; every container asks for CPU and memory and caps its memory,
   runs as a numbered non-root user without privilege escalation or capabilities; every hostPath has a type; a
   `huawei.com/npu` pod under Volcano carries `huawei.com/schedule_policy` (else MindCluster's plugin gives it no
   NPUs); a container that reads the rank table waits for it first.
A kind with no schema is an error, never a silent pass. Problems come back as a list of strings; `check` raises.
"""

from __future__ import annotations

import copy
import functools
from typing import Any

from envkit.errors import CheckFailed, Where

CORE_GROUPS = {"v1", "apps/v1", "batch/v1", "kustomize.config.k8s.io/v1beta1"}
CRDS = {
    ("mindxdl.gitee.com/v1", "AscendJob"): "ascendjob_v1.yaml",
    ("batch.volcano.sh/v1alpha1", "Job"): "job_v1alpha1.yaml",
    ("kubeflow.org/v1", "PyTorchJob"): "pytorchjob_v1.yaml",
    ("leaderworkerset.x-k8s.io/v1", "LeaderWorkerSet"): "leaderworkerset_v1.yaml",
}
DEFS_ID = "https://kubernetes.io/api/_definitions.json"
_REF_PREFIX = "k8s:"


def _data_text(rel: str) -> str:
    from importlib import resources

    return resources.files("envkit").joinpath(f"data/k8s/{rel}").read_text()


@functools.lru_cache(maxsize=8)
def crd_file(api_version: str, kind: str) -> dict[str, Any] | None:
    """The vendored CRD schema file of a kind (source, group, version, kind, schema), or None."""
    import yaml

    name = CRDS.get((api_version, kind))
    if name is None:
        return None
    data: dict[str, Any] = yaml.safe_load(_data_text(f"crds/{name}"))
    return data


def _strict(node: Any) -> Any:
    """The schema with `additionalProperties: false` on every object node that lists properties (skipping nodes that
    preserve unknown fields), and `k8s:NAME` references pointed at the core definitions."""
    if isinstance(node, list):
        return [_strict(x) for x in node]
    if not isinstance(node, dict):
        return node
    out = {k: _strict(v) for k, v in node.items()}
    ref = out.get("$ref")
    if isinstance(ref, str) and ref.startswith(_REF_PREFIX):
        out["$ref"] = f"{DEFS_ID}#/$defs/{ref[len(_REF_PREFIX) :]}"
    if "properties" in out and "additionalProperties" not in out and not out.get("x-kubernetes-preserve-unknown-fields"):
        out["additionalProperties"] = False
    return out


def _schema_dir(kube_version: str) -> str:
    """kubernetes-validate's strict schema folder for `kube_version` (the newest it has at or below it)."""
    from kubernetes_validate import utils

    from envkit.errors import BadInput

    wanted = tuple(int(x) for x in kube_version.split("."))
    have = [v for v in utils.all_versions() if tuple(int(x) for x in utils.major_minor(v).split(".")) <= wanted]
    if not have:
        raise BadInput(
            f"--kube-version {kube_version}: kubernetes-validate {_kv_version()} has schemas from "
            f"{utils.major_minor(utils.all_versions()[0])} on",
            hint=f"Use a version from {utils.major_minor(utils.all_versions()[0])} to {utils.major_minor(utils.latest_version())}.",
        )
    return f"v{have[-1]}-local-strict"


def _kv_version() -> str:
    from kubernetes_validate.version import __version__

    return str(__version__)


@functools.lru_cache(maxsize=4)
def _definitions(schema_dir: str) -> dict[str, Any]:
    import json
    from importlib import resources

    text = resources.files("kubernetes_validate").joinpath(f"kubernetes-json-schema/{schema_dir}/_definitions.json").read_text()
    data: dict[str, Any] = json.loads(text)
    return data


@functools.lru_cache(maxsize=16)
def _crd_validator(api_version: str, kind: str, schema_dir: str) -> Any:
    import jsonschema
    from referencing import Registry, Resource

    crd = crd_file(api_version, kind)
    assert crd is not None
    schema = _strict(copy.deepcopy(crd["schema"]))
    schema["$schema"] = "https://json-schema.org/draft/2020-12/schema"
    schema["properties"]["apiVersion"] = {"const": api_version}
    schema["properties"]["kind"] = {"const": kind}
    schema.setdefault("required", [])
    schema["required"] = sorted({*schema["required"], "apiVersion", "kind", "metadata", "spec"})
    registry = Registry().with_resource(DEFS_ID, Resource.from_contents(_definitions(schema_dir)))
    return jsonschema.Draft202012Validator(schema, registry=registry)


def _path(err: Any) -> str:
    return ".".join(str(p) for p in err.absolute_path) or "(document)"


def schema_problems(doc: dict[str, Any], kube_version: str) -> list[str]:
    """What the upstream schema of the document's kind says against it ([] = valid)."""
    api_version, kind = doc.get("apiVersion"), doc.get("kind")
    if not isinstance(api_version, str) or not isinstance(kind, str):
        return ["no apiVersion/kind"]
    schema_dir = _schema_dir(kube_version)
    if (api_version, kind) in CRDS:
        validator = _crd_validator(api_version, kind, schema_dir)
        errors = sorted(validator.iter_errors(doc), key=lambda e: (list(map(str, e.absolute_path)), e.message))
        return [f"{kind} {_path(e)}: {e.message[:300]}" for e in errors]
    if api_version in CORE_GROUPS and api_version != "kustomize.config.k8s.io/v1beta1":
        import kubernetes_validate
        from kubernetes_validate import utils

        try:
            kubernetes_validate.validate(doc, schema_dir.split("-")[0][1:], strict=True)
        except utils.SchemaNotFoundError:
            return [f"no schema for {api_version} {kind} in kubernetes-validate {_kv_version()} ({schema_dir})"]
        except utils.ValidationError as exc:
            return [f"{kind} {'.'.join(str(p) for p in exc.absolute_path) or '(document)'}: {str(exc.message)[:300]}"]
        return []
    if api_version == "kustomize.config.k8s.io/v1beta1" and kind == "Kustomization":
        return _kustomization_problems(doc)
    return [f"no schema for {api_version} {kind}: envkit renders no kind it cannot check"]


def _kustomization_problems(doc: dict[str, Any]) -> list[str]:
    """kustomize's Kustomization has no OpenAPI schema upstream; the fields envkit writes are checked by shape."""
    allowed = {"apiVersion", "kind", "namespace", "resources"}
    problems = [f"Kustomization: field {k!r} is not one envkit writes" for k in sorted(set(doc) - allowed)]
    res = doc.get("resources")
    if not isinstance(res, list) or not all(isinstance(r, str) and r and not r.startswith("/") for r in res):
        problems.append("Kustomization resources: a list of relative paths")
    return problems


# --- envkit's own rules -------------------------------------------------------------------------------------------
def _containers(doc: dict[str, Any]) -> list[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, pod spec, container) for every container of the document."""
    from envkit.export.k8s import pod_specs

    out = []
    for i, spec in enumerate(pod_specs(doc)):
        for c in spec.get("containers") or []:
            out.append((f"pod {i} container {c.get('name')!r}", spec, c))
    return out


def _leader_replicas(replicas: dict[str, Any], leader: str) -> list[str]:
    spec = replicas.get(leader)
    if spec is None:
        return [f"no {leader} replica (exactly one is needed)"]
    if spec.get("replicas", 1) != 1:
        return [f"{leader} replicas {spec.get('replicas')}: must be exactly 1"]
    return []


def rule_problems(doc: dict[str, Any], *, image: str, resource: str) -> list[str]:
    """envkit's own rules for one document ([] = none broken)."""
    kind = doc.get("kind")
    problems: list[str] = []
    if kind == "DaemonSet":
        problems.append(
            "DaemonSet: a one-shot NPU job cannot be one (its pods restart Always and hold the NPUs); use a Job per node"
        )
    spec = doc.get("spec") or {}
    if kind == "AscendJob":
        labels = (doc.get("metadata") or {}).get("labels") or {}
        if labels.get("framework") not in ("pytorch", "mindspore", "tensorflow"):
            problems.append("AscendJob: metadata.labels.framework must be pytorch, mindspore or tensorflow")
        problems += [f"AscendJob: {p}" for p in _leader_replicas(spec.get("replicaSpecs") or {}, "Master")]
        for _where, _pod, c in _containers(doc):
            if c.get("name") != "ascend":
                problems.append(f"AscendJob: container {c.get('name')!r} must be named 'ascend'")
            elif not any(p.get("name") == "ascendjob-port" for p in c.get("ports") or []):
                problems.append("AscendJob: container 'ascend' needs the port named 'ascendjob-port'")
    if kind == "PyTorchJob":
        problems += [f"PyTorchJob: {p}" for p in _leader_replicas(spec.get("pytorchReplicaSpecs") or {}, "Master")]
        for _where, _pod, c in _containers(doc):
            if c.get("name") != "pytorch":
                problems.append(f"PyTorchJob: container {c.get('name')!r} must be named 'pytorch'")
    one_shot = kind in ("Job", "AscendJob", "PyTorchJob") and doc.get("apiVersion") != "apps/v1"
    for where, pod, c in _containers(doc):
        res = c.get("resources") or {}
        req, lim = res.get("requests") or {}, res.get("limits") or {}
        for name in sorted(set(req) | set(lim)):
            if "/" in name and req.get(name) != lim.get(name):
                problems.append(f"{kind} {where}: {name} requests {req.get(name)} != limits {lim.get(name)}")
        if resource not in req:
            problems.append(f"{kind} {where}: requests no {resource}")
        if c.get("image") != image:
            problems.append(f"{kind} {where}: image {c.get('image')!r} is not {image!r}")
        if "@sha256:" in image and "@sha256:" not in str(c.get("image")):
            problems.append(f"{kind} {where}: image not digest-pinned")
        if one_shot and pod.get("restartPolicy") != "Never":
            problems.append(f"{kind} {where}: a one-shot NPU pod must not restart (restartPolicy Never)")
        for env in c.get("env") or []:
            ref = ((env.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath", "")
            if env.get("name") == "ASCEND_VISIBLE_DEVICES" and ref and ref != f"metadata.annotations['{resource}']":
                problems.append(f"{kind} {where}: ASCEND_VISIBLE_DEVICES reads {ref}, not the annotation of {resource}")
        problems += [f"{kind} {where}: {p}" for p in _hygiene(c)]
    problems += _pod_problems(doc)
    if kind == "LeaderWorkerSet":
        problems += [f"LeaderWorkerSet: {p}" for p in _lws_problems(spec.get("leaderWorkerTemplate") or {})]
    if kind == "Job" and doc.get("apiVersion") == "batch/v1" and spec.get("backoffLimit") != 0:
        problems.append("Job: backoffLimit must be 0 (one try: a smoke that fails must show its first failure)")
    return problems


def _hygiene(c: dict[str, Any]) -> list[str]:
    """A container's CPU and memory, its security context, and the rank-table wait where it reads the rank table."""
    from envkit.export.k8s import RANK_TABLE_DIR, WAIT_RANK_TABLE

    out: list[str] = []
    res = c.get("resources") or {}
    req, lim = res.get("requests") or {}, res.get("limits") or {}
    for what, have in (("cpu request", "cpu" in req), ("memory request", "memory" in req), ("memory limit", "memory" in lim)):
        if not have:
            out.append(f"no {what}")
    sc = c.get("securityContext") or {}
    uid = sc.get("runAsUser")
    if sc.get("runAsNonRoot") is not True or not isinstance(uid, int) or uid <= 0:
        out.append("must run as non-root with a numbered user (securityContext runAsNonRoot, runAsUser > 0)")
    if sc.get("allowPrivilegeEscalation") is not False or sc.get("privileged"):
        out.append("must not escalate privileges (securityContext allowPrivilegeEscalation: false, not privileged)")
    caps = sc.get("capabilities") or {}
    if "ALL" not in (caps.get("drop") or []) or caps.get("add"):
        out.append("must drop every capability and add none (the NPUs are device nodes, not capabilities)")
    reads_rank_table = any(
        e.get("name") == "RANK_TABLE_FILE" and str(e.get("value", "")).startswith(RANK_TABLE_DIR) for e in c.get("env") or []
    )
    command = c.get("command") or []
    if reads_rank_table and (command[:2] != ["python3", "-c"] or len(command) < 3 or command[2] != WAIT_RANK_TABLE):
        out.append("reads the rank table but does not wait for it to be completed before it starts")
    return out


def _lws_problems(lwt: dict[str, Any]) -> list[str]:
    """Serving across nodes: the leader waits for its LWS_GROUP_SIZE Ray nodes before vLLM starts, the workers retry
    joining LWS_LEADER_ADDRESS, and HCCL_IF_IP is each pod's own address (`envkit.export.k8s`, vllm-ascend's Ray guide)."""
    out: list[str] = []
    for role, needs, what in (
        ("leaderTemplate", ("LWS_GROUP_SIZE", "ray status", "ray start --head"), "wait for its LWS_GROUP_SIZE Ray nodes"),
        ("workerTemplate", ("LWS_LEADER_ADDRESS", "attempt", "ray start --address"), "retry joining LWS_LEADER_ADDRESS"),
    ):
        for c in (((lwt.get(role) or {}).get("spec") or {}).get("containers")) or []:
            command = c.get("command") or []
            script = command[2] if command[:2] == ["/bin/sh", "-c"] and len(command) == 3 else ""
            if not all(n in script for n in needs):
                out.append(f"{role} container {c.get('name')!r} does not {what} (a /bin/sh -c script)")
            if "$(" in script or "$$" in script:
                out.append(f"{role} container {c.get('name')!r}: '$(' or '$$' in its script (the kubelet expands them)")
            ip = [e for e in c.get("env") or [] if e.get("name") == "HCCL_IF_IP"]
            if [((e.get("valueFrom") or {}).get("fieldRef") or {}).get("fieldPath") for e in ip] != ["status.podIP"]:
                out.append(f"{role} container {c.get('name')!r}: HCCL_IF_IP must be the pod's IP (fieldRef status.podIP)")
    return out


def _pod_problems(doc: dict[str, Any]) -> list[str]:
    """Each pod template's hostPath types and the Volcano scheduling policy of a `huawei.com/npu` pod."""
    from envkit.export.k8s import SCHEDULE_POLICY_KEY, SCHEDULE_POLICY_RESOURCE, pod_templates

    out: list[str] = []
    kind = doc.get("kind")
    for i, template in enumerate(pod_templates(doc)):
        spec = template["spec"]
        for v in spec.get("volumes") or []:
            if "hostPath" in v and not (v["hostPath"] or {}).get("type"):
                out.append(f"{kind} pod {i} volume {v.get('name')!r}: a hostPath without a type (Directory, File, ...)")
        npu = any(
            SCHEDULE_POLICY_RESOURCE in ((c.get("resources") or {}).get("requests") or {}) for c in spec.get("containers") or []
        )
        annotations = (template.get("metadata") or {}).get("annotations") or {}
        if npu and spec.get("schedulerName") == "volcano" and not annotations.get(SCHEDULE_POLICY_KEY):
            out.append(
                f"{kind} pod {i}: requests {SCHEDULE_POLICY_RESOURCE} under Volcano without the {SCHEDULE_POLICY_KEY} "
                "annotation (MindCluster's plugin gives such a pod no NPUs)"
            )
    return out


def problems(files: dict[str, dict[str, Any]], *, kube_version: str, image: str, resource: str) -> list[str]:
    """Every problem of every document, each prefixed with its file."""
    out: list[str] = []
    for rel, doc in sorted(files.items()):
        for p in schema_problems(doc, kube_version) + rule_problems(doc, image=image, resource=resource):
            out.append(f"{rel}: {p}")
    return out


def check(files: dict[str, dict[str, Any]], *, kube_version: str, image: str, resource: str) -> None:
    """Raise CheckFailed (exit 1) naming every problem; nothing is written then."""
    found = problems(files, kube_version=kube_version, image=image, resource=resource)
    if found:
        shown = found[:20] + ([f"... and {len(found) - 20} more"] if len(found) > 20 else [])
        raise CheckFailed(
            f"{len(found)} rendered document problem(s); nothing was written:\n  " + "\n  ".join(shown),
            where=Where(None, None, None),
            hint="A value from the lock or the command line breaks a Kubernetes schema or an envkit rule: fix it and render again.",
            details={"problems": found},
        )


def sources() -> list[dict[str, Any]]:
    """Where each schema comes from (the README and `--json` name them)."""
    out: list[dict[str, Any]] = [{"kinds": "core", "source": f"kubernetes-validate {_kv_version()} (strict)"}]
    for (api_version, kind), _name in sorted(CRDS.items()):
        crd = crd_file(api_version, kind) or {}
        src = crd.get("source") or {}
        out.append(
            {"kinds": f"{api_version} {kind}", "repo": src.get("repo"), "path": src.get("path"), "commit": src.get("commit")}
        )
    return out
