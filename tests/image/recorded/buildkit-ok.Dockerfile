FROM localhost/envkit-base:bookworm AS os
FROM os AS torch
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=bind,source=python/torch,target=/tmp/envkit-python/torch \
    echo 'a3769274f447174e8aced0666d7a011cb3b550217786984c796e7c196abbf1eb  /tmp/envkit-python/torch/requirements.txt' | sha256sum -c - \
    && printf 'one line\nhalf a ' && sleep 1 && printf 'line\n' && echo built > /built
FROM torch AS runtime
RUN cat /built
