"""The texts of a launch set, per host: the Accelerate config, the HCCL environment block and the torchrun script.

Part of the export layer: what `envkit launch render` writes from the inventory, each host's hccn.conf and the
lock's chip (the rank table itself is the fleet layer's, `envkit.fleet.ranktable`). Every value is quoted for the
language it lands in (YAML through a dumper, sh through `shlex.quote`), and the training script is checked to be a
plain path that no program reads as an option.
"""

from __future__ import annotations

import re
import shlex

import yaml

from envkit.errors import BadInput, Where


def accelerate_config(num_machines: int, num_processes: int, rank: int, main_ip: str, port: int) -> str:
    cfg = {
        "compute_environment": "LOCAL_MACHINE",
        "distributed_type": "MULTI_NPU",
        "downcast_bf16": "no",
        "machine_rank": rank,
        "main_process_ip": main_ip,
        "main_process_port": port,
        "main_training_function": "main",
        "mixed_precision": "no",
        "num_machines": num_machines,
        "num_processes": num_processes,
        "rdzv_backend": "static",
        "same_network": True,
        "use_cpu": False,
    }
    return (
        "# Accelerate config rendered by envkit launch render; use: accelerate launch --config_file THIS train.py\n"
        + yaml.safe_dump(cfg, sort_keys=True)
    )


def hccl_env_sh(env: dict[str, str], sources: list[str]) -> str:
    lines = ["# HCCL environment rendered by envkit launch render: source it on this node before the launch."]
    lines += [f"# {s}" for s in sources]
    lines += [f"export {k}={shlex.quote(v)}" for k, v in env.items()]
    return "\n".join(lines) + "\n"


_SCRIPT = re.compile(r"[A-Za-z0-9_.][A-Za-z0-9_./+-]{0,1023}")


def train_script(value: str, where: Where) -> str:
    """The training script torchrun starts: a plain relative or absolute path that cannot be read as an option of
    torchrun (no leading '-'), nor climb with `..`; it reaches the rendered script quoted as well."""
    path = value[1:] if value.startswith("/") else value
    if not _SCRIPT.fullmatch(path) or ".." in path.split("/"):
        raise BadInput(
            f"envkit_train_script={value[:80]!r} is not a plain script path",
            where=where,
            hint="A path of letters, digits and _ . / + - that does not start with '-' (e.g. train.py or /opt/job/run_clm.py).",
        )
    return value


def torchrun_argv(nnodes: int, nproc: int, node_rank: int | str, master: str, port: int | str, script: str) -> list[str]:
    """torchrun's command line; a Kubernetes pod passes `$(RANK)`, `$(MASTER_ADDR)`, `$(MASTER_PORT)` (expanded by the
    kubelet from the pod's environment) where a host's launch set has numbers."""
    return [
        "torchrun",
        f"--nnodes={nnodes}",
        f"--nproc-per-node={nproc}",
        f"--node-rank={node_rank}",
        f"--master-addr={master}",
        f"--master-port={port}",
        script,
    ]


def torchrun_sh(argv: list[str], rank_table: str) -> str:
    return (
        "#!/bin/sh\n"
        "# torchrun for this node, rendered by envkit launch render. The training script must call\n"
        '# torch.distributed.init_process_group(backend="hccl") (import torch_npu first).\n'
        "set -eu\n"
        'here=$(cd "$(dirname "$0")" && pwd)\n'
        '. "$here/hccl_env.sh"\n'
        f'export RANK_TABLE_FILE="${{RANK_TABLE_FILE:-$here/../../{rank_table}}}"\n'
        f'exec {" ".join(shlex.quote(a) for a in argv)} "$@"\n'
    )
