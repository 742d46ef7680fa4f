#!/bin/sh
# Assemble the image build context of this bundle, offline: the rendered files of image/context/ plus the
# vendor packages and wheels the Dockerfile copies, taken from the bundle itself (hard links when the
# folder is on the same file system, else copies) and each checked against its sha256.
# Usage: sh image/assemble.sh [CONTEXT_DIR]   (default ./envkit-image-context), then build with
#   docker build -t TAG CONTEXT_DIR      or      podman build -t TAG CONTEXT_DIR
# (the Dockerfile's FROM --platform names the lock's platform; a builder of another arch emulates it: qemu-user-static)
set -eu
HERE=$(cd "$(dirname "$0")/.." && pwd -P)
CTX=${1:-$PWD/envkit-image-context}
LIST="$HERE/image/context.sha256"
die() { code=$1; shift; echo "assemble.sh: $*" >&2; exit "$code"; }

[ -f "$LIST" ] || die 2 "$LIST is missing: this bundle has no image context"
case "$CTX" in /*) ;; *) CTX=$PWD/$CTX ;; esac
case "$CTX/" in "$HERE"/*) die 2 "put the context outside the bundle ($HERE), e.g. /var/tmp/envkit-image-context" ;; esac
[ ! -e "$CTX" ] || die 2 "$CTX already exists; remove it or name another folder"
command -v sha256sum >/dev/null 2>&1 || die 2 "sha256sum not found (coreutils)"
# the rendered context and its list are the bundle's files: checked against SHA256SUMS first (install.sh checks
# SHA256SUMS itself against the manifest and ENVKIT_BUNDLE_DIGEST)
[ -f "$HERE/SHA256SUMS" ] || die 2 "$HERE/SHA256SUMS is missing: not a complete bundle"
sums=$(mktemp) || die 2 "mktemp failed (TMPDIR=${TMPDIR:-/tmp})"
grep -E '^[0-9a-f]{64}  image/(context/|context\.sha256$)' "$HERE/SHA256SUMS" > "$sums" \
  || { rm -f "$sums"; die 1 "SHA256SUMS lists no image context"; }
(cd "$HERE" && sha256sum --check --strict --quiet "$sums") \
  || { rm -f "$sums"; die 1 "the bundle's image context does not match SHA256SUMS (see above); nothing was assembled"; }
rm -f "$sums"

done_ok=0
cleanup() { [ "$done_ok" = 1 ] || rm -rf "$CTX"; }
trap cleanup EXIT
trap 'exit 130' INT TERM

mkdir -p "$CTX"
cp -R "$HERE/image/context/." "$CTX/"
# each line: sha256, path in the context, path in the bundle
: > "$CTX/.envkit-check"
while read -r sha rel src; do
  case "$sha" in ''|'#'*) continue ;; esac
  # a sha256, then two plain relative paths: nothing may point outside the context or the bundle
  printf '%s %s %s\n' "$sha" "$rel" "$src" | grep -q -E '^[0-9a-f]{64} [A-Za-z0-9._+~-]+(/[A-Za-z0-9._+~-]+)* [A-Za-z0-9._+~-]+(/[A-Za-z0-9._+~-]+)*$' \
    && ! printf '%s\n%s\n' "$rel" "$src" | grep -q -E '(^|/)\.\.(/|$)' \
    || die 1 "image/context.sha256 holds a line that is not a sha256 and two plain relative paths; nothing was assembled"
  [ -f "$HERE/$src" ] || die 1 "the bundle lacks $src (needed as $rel); nothing was assembled"
  mkdir -p "$(dirname "$CTX/$rel")"
  ln "$HERE/$src" "$CTX/$rel" 2>/dev/null || cp "$HERE/$src" "$CTX/$rel"
  echo "$sha  $CTX/$rel" >> "$CTX/.envkit-check"
done < "$LIST"
sha256sum --check --quiet --strict "$CTX/.envkit-check" || die 1 "a file does not match its sha256 (see above); nothing was assembled"
rm -f "$CTX/.envkit-check"
done_ok=1
echo "assembled the image build context in $CTX"
echo "next: docker build -t envkit/stack $CTX   (or: podman build -t envkit/stack $CTX)"
