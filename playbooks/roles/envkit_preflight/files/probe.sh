#!/bin/sh
# envkit preflight probe: one JSON object on stdout; reads only, changes nothing.
# $1: install path (e.g. /usr/local/Ascend)   $2: PCI vendor id (19e5)
P="${1:-/usr/local/Ascend}"
V="${2:-19e5}"
pci=0
for f in /sys/bus/pci/devices/*/vendor; do
  [ -r "$f" ] || continue
  case "$(cat "$f" 2>/dev/null)" in "0x$V"|"0x$(echo "$V" | tr a-f A-F)") pci=$((pci + 1)) ;; esac
done
smi=""
for c in /usr/local/bin/npu-smi /usr/local/sbin/npu-smi "$(command -v npu-smi 2>/dev/null)"; do
  [ -n "$c" ] && [ -x "$c" ] && { smi="$c"; break; }
done
names=""
smi_ok=false
if [ -n "$smi" ]; then
  if out=$("$smi" info 2>/dev/null); then
    smi_ok=true
    names=$(printf '%s\n' "$out" | awk -F'|' '/^\| [0-9]+ +[A-Za-z0-9]/ { split($2, a, " "); if (a[2] != "") print a[2] }' | sort -u | tr '\n' ' ')
  fi
fi
# processes holding an NPU device open (then driver and firmware must not change)
busy=""
for fd in /proc/[0-9]*/fd/*; do
  t=$(readlink "$fd" 2>/dev/null) || continue
  case "$t" in /dev/davinci[0-9]*) p=${fd#/proc/}; busy="$busy ${p%%/*}" ;; esac
done
busy=$(echo $busy | tr ' ' '\n' | sort -un | tr '\n' ' ')
d="$P"; while [ ! -d "$d" ]; do d=$(dirname "$d"); done
free_kb=$(df -Pk "$d" | awk 'NR==2 {print $4}')
k=$(uname -r)
headers=false; [ -d "/lib/modules/$k/build" ] || [ -d "/usr/src/kernels/$k" ] && headers=true
dkms=false; command -v dkms >/dev/null 2>&1 && dkms=true
venv=false; python3 -c 'import venv, ensurepip' >/dev/null 2>&1 && venv=true
pyver=$(python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
printf '{"pci_devices": %s, "npu_smi": "%s", "npu_smi_ok": %s, "npu_names": "%s", "busy_pids": "%s", "free_kb": %s, "kernel": "%s", "kernel_headers": %s, "dkms": %s, "python_venv": %s, "python_version": "%s"}\n' \
  "$pci" "$smi" "$smi_ok" "$(echo $names)" "$(echo $busy)" "${free_kb:-0}" "$k" "$headers" "$dkms" "$venv" "$pyver"
