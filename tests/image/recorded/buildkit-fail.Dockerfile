FROM localhost/envkit-base:bookworm AS os
FROM os AS torch
SHELL ["/bin/bash", "-o", "pipefail", "-c"]
RUN --mount=type=bind,source=python/torch,target=/tmp/envkit-python/torch \
    echo '92658163e336063d79bdcf555c69f00ba2a44f106675873b685d6b0859aae0da  /tmp/envkit-python/torch/requirements.txt' | sha256sum -c - \
    && printf 'one line\nhalf a ' && sleep 1 && printf 'line\n' && echo built > /built
FROM torch AS runtime
RUN cat /built
