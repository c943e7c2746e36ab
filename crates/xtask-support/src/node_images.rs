//! Which kind node image each node of a cluster runs.
//!
//! The offline node image comes as a pair (`node-image` builds both): the
//! control plane runs the full image (every control-plane image preloaded),
//! the workers a lean variant without the images only a control plane runs
//! (kube-apiserver, kube-controller-manager, kube-scheduler, etcd), which
//! keeps them out of each worker's `/var` volume (BENCHMARKS.md "The cost of
//! a tray"). A user's own image (`--node-image`, the online `kindest/node`)
//! cannot be slimmed that way: every node runs it ([`NodeImages::uniform`]).

/// A node's role in a kind cluster.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// The control plane (kind's `control-plane` role).
    ControlPlane,
    /// A worker (kind's `worker` role): a compute tray.
    Worker,
}

impl Role {
    /// kind's spelling of the role in a cluster config's `nodes[].role`.
    pub fn parse_kind(role: &str) -> Option<Role> {
        match role {
            "control-plane" => Some(Role::ControlPlane),
            "worker" => Some(Role::Worker),
            _ => None,
        }
    }
}

/// The node image of each role.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NodeImages {
    /// What the control plane runs.
    pub control_plane: String,
    /// What every worker runs.
    pub worker: String,
}

impl NodeImages {
    /// One image on every node (a user's image, the online path).
    pub fn uniform(image: &str) -> NodeImages {
        NodeImages {
            control_plane: image.to_owned(),
            worker: image.to_owned(),
        }
    }

    /// Whether every node runs the same image (kind's `--image` then suffices).
    pub fn is_uniform(&self) -> bool {
        self.control_plane == self.worker
    }

    /// The image a node of `role` runs.
    pub fn for_role(&self, role: Role) -> &str {
        match role {
            Role::ControlPlane => &self.control_plane,
            Role::Worker => &self.worker,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_role_gets_its_image() {
        let pair = NodeImages {
            control_plane: "cdsim/kind-node:v1-abc".into(),
            worker: "cdsim/kind-node:v1-def-worker".into(),
        };
        assert!(!pair.is_uniform());
        assert_eq!(pair.for_role(Role::ControlPlane), "cdsim/kind-node:v1-abc");
        assert_eq!(pair.for_role(Role::Worker), "cdsim/kind-node:v1-def-worker");
        let one = NodeImages::uniform("kindest/node:v1.34.3");
        assert!(one.is_uniform());
        assert_eq!(one.for_role(Role::Worker), "kindest/node:v1.34.3");
        assert_eq!(Role::parse_kind("worker"), Some(Role::Worker));
        assert_eq!(Role::parse_kind("control-plane"), Some(Role::ControlPlane));
        assert_eq!(Role::parse_kind("Worker"), None);
    }
}
