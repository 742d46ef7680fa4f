#!/usr/bin/env bash
# Docker's engine for tests/image/test_docker_buildkit.py (envkit builds on Docker through BuildKit, /build?version=2).
# Idempotent: installs Debian's docker.io, starts dockerd on a socket, data root, exec root and containerd namespace
# of its own under the work dir (never /var/run/docker.sock nor a Docker the host runs), without iptables rules,
# and imports the Debian base that podman.sh debootstrapped (run it first) as localhost/envkit-base:bookworm.
# Prints `export ...` lines for the tests: eval "$(tests/integration/setup/docker.sh)".
# Stop it: kill "$(cat /var/tmp/envkit-docker/dockerd.pid)". Env: ENVKIT_DOCKER_WORK (default /var/tmp/envkit-docker),
# ENVKIT_PODMAN_WORK (where podman.sh left rootfs-base.tar; default /var/tmp/envkit-podman).
set -euo pipefail
W="${ENVKIT_DOCKER_WORK:-/var/tmp/envkit-docker}"
P="${ENVKIT_PODMAN_WORK:-/var/tmp/envkit-podman}"
BASE=localhost/envkit-base:bookworm
SOCK="$W/docker.sock"
mkdir -p "$W"
log() { echo "docker.sh: $*" >&2; }

if [ "$(id -u)" != 0 ]; then log "needs root"; exit 2; fi
if ! command -v dockerd >/dev/null || ! command -v containerd >/dev/null; then
  log "installing docker.io"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends docker.io >&2
fi
ping() { curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }
if ! ping; then
  rm -f "$SOCK"
  # from the work dir, as podman.sh starts its service: the caller's folder (a CI clone) may go first
  (cd "$W" && exec nohup dockerd --data-root "$W/root" --exec-root "$W/exec" --pidfile "$W/dockerd.pid" \
    -H "unix://$SOCK" --containerd-namespace envkit --iptables=false --ip6tables=false \
    > "$W/dockerd.log" 2>&1 < /dev/null) &
  for _ in $(seq 300); do ping && break; sleep 0.2; done
  ping || { log "dockerd did not answer in 60 s: $W/dockerd.log"; tail -n 20 "$W/dockerd.log" >&2; exit 2; }
fi
api() { curl -fsS --unix-socket "$SOCK" "$@"; }
if ! api "http://d/images/$BASE/json" >/dev/null 2>&1; then
  [ -f "$P/rootfs-base.tar" ] || { log "no $P/rootfs-base.tar: run tests/integration/setup/podman.sh first"; exit 2; }
  log "importing $P/rootfs-base.tar as $BASE"
  api -X POST -H "Content-Type: application/x-tar" -T "$P/rootfs-base.tar" \
    "http://d/images/create?fromSrc=-&repo=localhost/envkit-base&tag=bookworm" >/dev/null
fi
echo "export ENVKIT_TEST_DOCKER_HOST=unix://$SOCK"
echo "export ENVKIT_TEST_DOCKER_BASE=$BASE"
