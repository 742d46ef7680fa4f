"""`envkit k8s render`: read the lock, plan the base (`envkit.export.k8s`), check every document
(`envkit.export.k8s_check`), then write the files into an output folder envkit owns (`envkit.io.outputs.claim_output`).

Nothing is written when a check fails; the same lock and options give the same bytes.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from envkit.export.k8s import K8sOptions, K8sPlan, plan_k8s, texts
from envkit.export.k8s_check import check, sources
from envkit.io.outputs import K8S_BASE, claim_output
from envkit.lock.gate import SCHEMA_ONLY, LockCheck


@dataclass
class K8sResult:
    plan: K8sPlan
    out_dir: Path
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256

    def to_dict(self) -> dict[str, Any]:
        p = self.plan
        return {
            "chip": p.chip,
            "name": p.name,
            "namespace": p.namespace,
            "image": p.image,
            "resource": p.resource,
            "npus_per_node": p.npus_per_node,
            "nodes": p.node_count,
            "workload": _workload(p),
            "engine": None if p.serving or p.smoke_only else p.engine,
            "rank_table": p.rank_table,
            "node_labels": p.node_labels,
            "schedule_policy": p.schedule_policy,
            "smoke_npus": p.smoke_npus,
            "model": p.model,
            "kube_version": p.kube_version,
            "validated_against": sources(),
            "out_dir": str(self.out_dir),
            "files": self.files,
            "notes": p.notes,
        }


def _workload(p: K8sPlan) -> str:
    return "smoke" if p.smoke_only else "serving" if p.serving else "training"


def render_k8s(lock: Path, out: Path, opts: K8sOptions, *, force: bool = False, lock_check: LockCheck = SCHEMA_ONLY) -> K8sResult:
    from envkit.lock.file import read_lock

    locked = read_lock(Path(lock), lock_check)
    plan = plan_k8s(locked, opts)
    check(plan.files, kube_version=plan.kube_version, image=plan.image, resource=plan.resource)
    files = texts(plan)
    claim = claim_output(Path(out), K8S_BASE, force=force, inputs=[Path(lock)])
    writer = claim.writer()
    result = K8sResult(plan=plan, out_dir=Path(out))
    for rel, text in sorted(files.items()):
        writer.text(rel, text)
        result.files[rel] = hashlib.sha256(text.encode()).hexdigest()
    writer.commit()
    return result


def format_result(result: K8sResult) -> list[str]:
    p = result.plan
    what = {"smoke": "smoke Jobs only", "serving": "serving", "training": f"training ({p.engine})"}[_workload(p)]
    lines = [
        f"Kubernetes base for chip {p.chip}: {what} on {p.node_count} node(s) x {p.npus_per_node} {p.resource}; "
        f"{sum(1 for f in p.files if f.startswith('smoke/'))} smoke Job(s); every document checked (Kubernetes {p.kube_version} schemas, CRDs, envkit rules)"
    ]
    lines += [f"note: {n}" for n in p.notes]
    lines += [f"wrote {result.out_dir / rel}" for rel in result.files]
    lines.append(f"apply: kubectl apply -k {result.out_dir}")
    return lines
