"""The export layer: every text envkit renders from a lock, through the one Jinja environment (`render`).

`container`: the container facts every rendered file shares (paths inside the image, the serving environment);
`image`: the image build plan (Dockerfile and context, also the bundle's image context); `render`: the Jinja
environment with its quoting filters and the context writer; `runargs`: `docker run` device arguments. Plans are
data here; the jobs (`image`, `airgap`, `provision`, `launch`) call them and an executor. It imports no job.
"""
