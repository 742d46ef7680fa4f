"""The container facts every rendered file shares: where an image puts things, what a serving container runs.

One place for the paths and environment that the Dockerfile, the bundle's image context, `docker run` arguments
and the serving smoke all name, so the image envkit builds and the commands that run it never disagree.
"""

from __future__ import annotations

# Where the image puts things. The venv is the one Python the image runs.
VENV = "/opt/envkit/venv"
ASCEND = "/usr/local/Ascend"
DRIVER = f"{ASCEND}/driver"
LOCK_IN_IMAGE = "/etc/envkit/envkit.lock"
SERVING_ENTRYPOINT = ("vllm", "serve")
# The serving environment of the vllm-ascend tutorials (most exported lines across them): the serving image bakes
# it, and `envkit smoke --serve` starts `vllm serve` on an NPU with it.
NPU_SERVING_ENV = {"PYTORCH_NPU_ALLOC_CONF": "expandable_segments:True", "TASK_QUEUE_ENABLE": "1", "OMP_PROC_BIND": "false"}
