#!/bin/bash
# cgroup v2 only: enable every controller the node's root cgroup offers for its
# children, then create kubelet's cgroup roots (/kubelet, /kubelet.slice).
set -o errexit -o nounset -o pipefail
root=/sys/fs/cgroup
if [[ -s "$root/cgroup.procs" ]]; then
  echo "ERROR: processes still in the root cgroup; run after systemd has started" >&2
  exit 1
fi
for controller in $(cat "$root/cgroup.controllers"); do
  echo "+$controller" > "$root/cgroup.subtree_control"
done
for child in kubelet kubelet.slice; do
  mkdir -p "$root/$child"
  for controller in $(cat "$root/$child/cgroup.controllers"); do
    echo "+$controller" > "$root/$child/cgroup.subtree_control" || true
  done
done
