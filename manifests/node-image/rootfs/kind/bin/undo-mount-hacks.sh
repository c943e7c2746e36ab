#!/bin/bash
# On cgroup v1 the entrypoint hid the "misc" controller from systemd by
# bind-mounting a filtered /proc/cgroups; once systemd has started, containerd
# and the kubelet should see the real file again.
set -o errexit -o nounset -o pipefail
if [[ -f /sys/fs/cgroup/cgroup.controllers ]]; then
  exit 0
fi
umount /proc/cgroups 2>/dev/null || true
