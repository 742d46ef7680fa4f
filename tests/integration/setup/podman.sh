#!/usr/bin/env bash
# Podman for the image integration tests (docs: /work/shared/reference/infra-feasibility.md §1).
# Idempotent: installs podman/buildah/runc, writes a containers.conf (runc, capped ulimits),
# debootstraps a minbase Debian base once (cached in the work dir) and imports it as
# localhost/envkit-base:bookworm (and an arm64 one, localhost/envkit-base:bookworm-arm64, for the emulated build),
# then serves Podman's Docker-compatible API on a unix socket.
# Prints `export ...` lines for the tests: eval "$(tests/integration/setup/podman.sh)".
# Env: ENVKIT_PODMAN_WORK (default /var/tmp/envkit-podman), DEBIAN_MIRROR (default deb.debian.org).
set -euo pipefail
W="${ENVKIT_PODMAN_WORK:-/var/tmp/envkit-podman}"
MIRROR="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"
BASE=localhost/envkit-base:bookworm
mkdir -p "$W"
log() { echo "podman.sh: $*" >&2; }

if [ "$(id -u)" != 0 ]; then log "needs root"; exit 2; fi
need=""
for t in podman buildah runc debootstrap; do command -v "$t" >/dev/null || need=1; done
if [ -n "$need" ]; then
  log "installing podman buildah runc skopeo uidmap debootstrap"
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends \
    podman buildah runc skopeo uidmap debootstrap >&2
fi

# runc (crun fails on cgroup v1 hybrid hosts); ulimits under the hard limits of CI runners.
cat > "$W/containers.conf" <<'CONF'
[containers]
default_ulimits = ["nofile=8192:8192", "nproc=8192:8192"]
[engine]
runtime = "runc"
cgroup_manager = "cgroupfs"
events_logger = "file"
CONF
export CONTAINERS_CONF="$W/containers.conf"

if ! podman image exists "$BASE"; then
  if [ ! -f "$W/rootfs-base.tar" ]; then
    log "debootstrap minbase bookworm (about a minute)"
    rm -rf "$W/rootfs-base"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates bookworm "$W/rootfs-base" "$MIRROR" >&2
    rm -rf "$W/rootfs-base/var/cache/apt/archives/"*.deb "$W/rootfs-base/var/lib/apt/lists/"*
    tar -C "$W/rootfs-base" -cf "$W/rootfs-base.tar.tmp" . && mv "$W/rootfs-base.tar.tmp" "$W/rootfs-base.tar"
    rm -rf "$W/rootfs-base"
  fi
  podman import "$W/rootfs-base.tar" "$BASE" >&2
fi

# The aarch64 base for the emulated build (tests/image/test_podman_emulated.py): Debian's arm64 packages unpacked
# with mmdebstrap, whose maintainer scripts run under qemu-user-static (registered with binfmt_misc here when the
# host's systemd did not), imported as an arm64 image. Skipped (and that test with it) with ENVKIT_NO_EMULATION=1.
BASE_ARM64=localhost/envkit-base:bookworm-arm64
if [ -z "${ENVKIT_NO_EMULATION:-}" ]; then
  # arch-test: mmdebstrap refuses a foreign architecture without it ("E: install arch-test for foreign
  # architecture support"); it is only a Recommends of mmdebstrap, which --no-install-recommends leaves out
  if ! command -v mmdebstrap >/dev/null || ! command -v arch-test >/dev/null || [ ! -x /usr/libexec/qemu-binfmt/aarch64-binfmt-P ]; then
    log "installing qemu-user-static mmdebstrap arch-test"
    apt-get update -qq
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends qemu-user-static mmdebstrap arch-test >&2
  fi
  B=/proc/sys/fs/binfmt_misc
  [ -e "$B/register" ] || mount -t binfmt_misc binfmt_misc "$B" >&2
  if [ ! -e "$B/qemu-aarch64" ]; then
    log "registering qemu-aarch64 with binfmt_misc"
    cat /usr/lib/binfmt.d/qemu-aarch64.conf > "$B/register"
  fi
  if ! podman image exists "$BASE_ARM64"; then
    if [ ! -f "$W/rootfs-base-arm64.tar" ]; then
      log "mmdebstrap minbase bookworm arm64 (a few minutes: emulated)"
      rm -rf "$W/rootfs-base-arm64"
      mmdebstrap --variant=minbase --arch=arm64 --include=python3,python3-venv,ca-certificates \
        bookworm "$W/rootfs-base-arm64" "$MIRROR" >&2
      rm -rf "$W/rootfs-base-arm64/var/cache/apt/archives/"*.deb "$W/rootfs-base-arm64/var/lib/apt/lists/"*
      tar -C "$W/rootfs-base-arm64" -cf "$W/rootfs-base-arm64.tar.tmp" . && mv "$W/rootfs-base-arm64.tar.tmp" "$W/rootfs-base-arm64.tar"
      rm -rf "$W/rootfs-base-arm64"
    fi
    podman import --arch arm64 "$W/rootfs-base-arm64.tar" "$BASE_ARM64" >&2
  fi
  echo "export ENVKIT_TEST_BASE_ARM64=$BASE_ARM64"
fi

SOCK="$W/podman.sock"
# a service left by an earlier set-up whose folder has since been removed cannot start containers: replaced
old_pid=$(cat "$W/podman-service.pid" 2>/dev/null || true)
case "$( [ -n "$old_pid" ] && readlink "/proc/$old_pid/cwd" 2>/dev/null)" in
  *" (deleted)") log "restarting the API service (its folder is gone)"; kill "$old_pid"; sleep 1 ;;
esac
if ! { [ -S "$SOCK" ] && curl -fsS --unix-socket "$SOCK" http://d/_ping >/dev/null 2>&1; }; then
  rm -f "$SOCK"
  # started from the work dir: conmon works in the service's folder, and the caller's (a CI clone) may be removed
  # while the service lives on ("[conmon:e] Failed to get working directory", containers then fail to start)
  (cd "$W" && exec nohup env CONTAINERS_CONF="$CONTAINERS_CONF" podman system service --time=0 "unix://$SOCK" \
    > "$W/podman-service.log" 2>&1 < /dev/null) &
  echo $! > "$W/podman-service.pid"
  for _ in $(seq 50); do [ -S "$SOCK" ] && break; sleep 0.1; done
fi
echo "export CONTAINERS_CONF=$CONTAINERS_CONF"
echo "export DOCKER_HOST=unix://$SOCK"
echo "export ENVKIT_TEST_BASE=$BASE"
