"""The export layer: every text envkit renders from a lock, through the one Jinja environment (`render`).

`container` (the bottom; it imports no other export module): `ContainerFacts`, what a container of the lock needs
(devices, driver mounts, environment, tag, device-plugin resource), derived from the lock alone, and the paths
every rendered file shares; every runtime below reads it:
`image`: the image build plan (Dockerfile and context, also the bundle's image context); `launch`: a launch set's
per-host texts (Accelerate config, HCCL environment, torchrun script); `render`: the Jinja
environment with its quoting filters and the context writer; `runargs`: `docker run` device arguments. Plans are
data here; the jobs (`image`, `airgap`, `provision`, `launch`) call them and an executor. It imports no job.
"""
