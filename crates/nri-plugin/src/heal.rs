//! Healing what the plugin missed: which existing containers were created while no plugin was
//! registered, and so run without the mock stack they should have.
//!
//! containerd does not hold container creation for an absent NRI plugin, so a container created
//! while the plugin restarts (a DaemonSet rollout, a drain, a node reboot, a containerd restart)
//! starts without its injection, and an injection cannot be added to a running container. At
//! every (re)connection the runtime lists the existing containers in Synchronize; the plugin asks
//! the runtime to stop each container it would have injected but that lacks the injection, so
//! that its controller (kubelet) creates it again, this time through the plugin.
//!
//! The request is an NRI eviction (`UpdateContainers`). containerd's NRI adaptation (up to at
//! least nri v0.11, containerd 2.2) accepts it but ignores evictions in unsolicited updates, so
//! after [`EVICTION_GRACE`] the plugin stops the container's init process itself, with SIGKILL
//! as containerd's eviction (StopContainer with timeout 0) would, and only after
//! [`cgroup_names_container`] confirms that the pid still belongs to that container (see
//! `stop.rs`; the chart gives the plugin the host's PID namespace and CAP_KILL for this).
//!
//! Pure: [`missed`] decides from the Synchronize lists and the policy alone, with the same
//! selection as CreateContainer ([`plan::select`]): an opted-out pod, an excluded namespace (the
//! chart always excludes its own release namespace, so the plugin's and the stager's pods are
//! never touched) and a container that already has the overlay mount are left alone.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::plan::{self, Policy, Selection};
use crate::proto::{container_state, Container, PodSandbox};

/// At most this many containers are stopped per synchronization; the rest are logged and left
/// for the next one (a bound on what one reconnection can do to a node).
pub const MAX_EVICTIONS: usize = 64;

/// The pause between two evictions, so that a node's containers restart gradually.
pub const EVICTION_INTERVAL: Duration = Duration::from_millis(200);

/// How long the plugin gives the runtime to act on an eviction before it stops the container's
/// process itself (containerd up to 2.2 ignores evictions in unsolicited updates).
pub const EVICTION_GRACE: Duration = Duration::from_secs(2);

/// How long after answering the final Synchronize the plugin waits before its first eviction,
/// so that the runtime has finished registering it.
pub const FIRST_EVICTION_DELAY: Duration = Duration::from_millis(500);

/// One container to have recreated.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Missed {
    /// The runtime's container id.
    pub container_id: String,
    /// `namespace/pod/container`, for the log.
    pub who: String,
    /// The container's init process as the runtime reported it (0: unknown).
    pub pid: u32,
}

/// The decision for one synchronization.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Healing {
    /// Containers to stop, at most [`MAX_EVICTIONS`], in the runtime's order.
    pub evict: Vec<Missed>,
    /// Missed containers beyond the bound, left alone this time.
    pub deferred: Vec<Missed>,
}

/// Why the plugin asks for a container to be stopped (the runtime logs it).
pub const EVICTION_REASON: &str =
    "created while the nvml-mock NRI plugin was not registered: stopped so that it is created again with the mock stack";

/// The running or created containers that the plugin would have injected but that lack the
/// injection (no overlay mount).
pub fn missed(policy: &Policy, pods: &[PodSandbox], containers: &[Container]) -> Healing {
    let pods: BTreeMap<&str, &PodSandbox> = pods.iter().map(|pod| (pod.id.as_str(), pod)).collect();
    let mut all = containers
        .iter()
        .filter(|container| {
            matches!(
                container.state,
                container_state::CREATED | container_state::RUNNING
            )
        })
        .filter_map(|container| {
            let pod = pods.get(container.pod_sandbox_id.as_str())?;
            match plan::select(policy, pod, container) {
                Selection::Skip(_) => None,
                Selection::Inject(_) => Some(Missed {
                    container_id: container.id.clone(),
                    who: format!("{}/{}/{}", pod.namespace, pod.name, container.name),
                    pid: container.pid,
                }),
            }
        });
    Healing {
        evict: all.by_ref().take(MAX_EVICTIONS).collect(),
        deferred: all.collect(),
    }
}

/// Whether a process's `/proc/<pid>/cgroup` text places it in the cgroup of the container
/// `container_id` (containerd names the leaf after the full container id, with the systemd
/// driver as `cri-containerd-<id>.scope`, with cgroupfs as `.../<id>`).
pub fn cgroup_names_container(cgroup: &str, container_id: &str) -> bool {
    !container_id.is_empty()
        && cgroup.lines().any(|line| {
            let path = line.splitn(3, ':').nth(2).unwrap_or_default();
            let leaf = path.rsplit('/').next().unwrap_or_default();
            leaf == container_id
                || leaf
                    .strip_suffix(".scope")
                    .is_some_and(|scope| scope.rsplit('-').next() == Some(container_id))
        })
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeSet;

    use super::*;
    use crate::proto::Mount;

    fn policy() -> Policy {
        Policy::for_tests("worker", "nvml-mock")
    }

    fn pod(id: &str, namespace: &str, annotations: &[(&str, &str)]) -> PodSandbox {
        PodSandbox {
            id: id.to_owned(),
            name: format!("pod-{id}"),
            namespace: namespace.to_owned(),
            annotations: annotations
                .iter()
                .map(|(key, value)| ((*key).to_owned(), (*value).to_owned()))
                .collect(),
            ..PodSandbox::default()
        }
    }

    fn container(id: &str, pod: &str, state: i32, injected: bool) -> Container {
        Container {
            id: id.to_owned(),
            pod_sandbox_id: pod.to_owned(),
            name: format!("c-{id}"),
            state,
            mounts: if injected {
                vec![Mount {
                    destination: "/opt/nvml-mock".to_owned(),
                    ..Mount::default()
                }]
            } else {
                Vec::new()
            },
            ..Container::default()
        }
    }

    fn ids(missed: &[Missed]) -> BTreeSet<&str> {
        missed.iter().map(|it| it.container_id.as_str()).collect()
    }

    #[test]
    fn only_selected_live_containers_without_the_overlay_are_evicted() {
        let pods = [
            pod("work", "default", &[]),
            pod("own", "nvml-mock", &[]),
            pod("system", "kube-system", &[]),
            pod(
                "out",
                "default",
                &[("nvml-mock.nvidia.com/inject", "false")],
            ),
        ];
        let containers = [
            container("missed", "work", container_state::RUNNING, false),
            container("created", "work", container_state::CREATED, false),
            container("injected", "work", container_state::RUNNING, true),
            container("stopped", "work", 4, false),
            container("unknown-state", "work", 0, false),
            container("plugin-or-stager", "own", container_state::RUNNING, false),
            container("kube-proxy", "system", container_state::RUNNING, false),
            container("opted-out", "out", container_state::RUNNING, false),
            container("orphan", "no-such-pod", container_state::RUNNING, false),
        ];
        let healing = missed(&policy(), &pods, &containers);
        assert_eq!(ids(&healing.evict), BTreeSet::from(["missed", "created"]));
        assert!(healing.deferred.is_empty());
        assert_eq!(healing.evict[0].who, "default/pod-work/c-missed");
    }

    #[test]
    fn evictions_are_bounded_per_synchronization() {
        let pods = [pod("work", "default", &[])];
        let containers: Vec<Container> = (0..MAX_EVICTIONS + 3)
            .map(|index| {
                container(
                    &format!("c{index}"),
                    "work",
                    container_state::RUNNING,
                    false,
                )
            })
            .collect();
        let healing = missed(&policy(), &pods, &containers);
        assert_eq!(healing.evict.len(), MAX_EVICTIONS);
        assert_eq!(healing.deferred.len(), 3);
        assert_eq!(healing.evict[0].container_id, "c0");
    }

    #[test]
    fn the_pid_is_confirmed_by_the_containers_cgroup() {
        let id = "3fa273be64e457164c240b2ab0b328854cd14f014a4930236f3dccf8e7f382bf";
        let systemd = format!(
            "0::/kubelet.slice/kubelet-kubepods.slice/kubelet-kubepods-besteffort.slice/cri-containerd-{id}.scope\n"
        );
        let cgroupfs = format!("0::/kubepods/besteffort/pod1234/{id}\n");
        let v1 = format!("12:pids:/kubepods/pod1234/{id}\n11:memory:/kubepods/pod1234/{id}\n");
        for text in [&systemd, &cgroupfs, &v1] {
            assert!(cgroup_names_container(text, id), "{text}");
        }
        assert!(
            !cgroup_names_container(&cgroupfs, "3fa273be"),
            "a prefix is no match"
        );
        assert!(!cgroup_names_container(
            "0::/system.slice/containerd.service\n",
            id
        ));
        assert!(!cgroup_names_container(&cgroupfs, ""));
    }

    #[test]
    fn nothing_to_do_on_a_healthy_node() {
        let pods = [pod("work", "default", &[])];
        let containers = [container("a", "work", container_state::RUNNING, true)];
        assert_eq!(missed(&policy(), &pods, &containers), Healing::default());
    }
}
