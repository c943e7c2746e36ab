//! The scenarios' test pods, one manifest for all: a container on one node
//! that asks for what the scenario allocates (a claim made from a template, a
//! named claim, or an extended resource) and then idles.
//!
//! The node is chosen through a node selector on `kubernetes.io/hostname`,
//! never `nodeName`: a pod bound by name skips the scheduler, and with it DRA
//! allocation.

use serde_json::{json, Value};

/// What the pod's one container asks for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub enum Asks<'a> {
    /// A claim made for the pod from the ResourceClaimTemplate `template`,
    /// called `name` in the pod.
    ClaimFromTemplate { name: &'a str, template: &'a str },
    /// The existing ResourceClaim `claim`, called `name` in the pod.
    Claim { name: &'a str, claim: &'a str },
    /// `count` of the extended resource `resource` (a device plugin's).
    Resource { resource: &'a str, count: u32 },
}

/// A pod that asks for something on one node and idles.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[allow(missing_docs)]
pub struct IdlePod<'a> {
    pub name: &'a str,
    pub namespace: &'a str,
    /// Its one label, by which its scenario finds and deletes it.
    pub label: (&'a str, &'a str),
    pub node: &'a str,
    pub image: &'a str,
    /// The container's name (what an exec names).
    pub container: &'a str,
    /// What the container runs, with `/bin/sh -c`.
    pub script: &'a str,
    pub asks: Asks<'a>,
}

/// A script that idles until the pod is deleted, and exits at once then.
pub const IDLE: &str = "trap : TERM INT; sleep infinity & wait";

impl IdlePod<'_> {
    /// The Pod manifest.
    pub fn manifest(&self) -> Value {
        let mut spec = json!({
            "automountServiceAccountToken": false,
            "restartPolicy": "Never",
            "terminationGracePeriodSeconds": 0,
            "nodeSelector": {"kubernetes.io/hostname": self.node},
            "containers": [{
                "name": self.container,
                "image": self.image,
                "imagePullPolicy": "IfNotPresent",
                "command": ["/bin/sh", "-c", self.script],
            }],
        });
        let resources = match self.asks {
            Asks::ClaimFromTemplate { name, template } => {
                spec["resourceClaims"] =
                    json!([{"name": name, "resourceClaimTemplateName": template}]);
                json!({"claims": [{"name": name}]})
            }
            Asks::Claim { name, claim } => {
                spec["resourceClaims"] = json!([{"name": name, "resourceClaimName": claim}]);
                json!({"claims": [{"name": name}]})
            }
            Asks::Resource { resource, count } => {
                json!({"limits": {resource: count.to_string()}})
            }
        };
        spec["containers"][0]["resources"] = resources;
        json!({
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": self.name,
                "namespace": self.namespace,
                "labels": {self.label.0: self.label.1},
            },
            "spec": spec,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pod(asks: Asks<'static>) -> Value {
        IdlePod {
            name: "p",
            namespace: "ns",
            label: ("app", "x"),
            node: "node-a",
            image: "img:1",
            container: "c",
            script: IDLE,
            asks,
        }
        .manifest()
    }

    #[test]
    fn the_scheduler_places_it_by_hostname_never_by_node_name() {
        let pod = pod(Asks::Resource {
            resource: "nvidia.com/gpu",
            count: 2,
        });
        assert!(pod["spec"].get("nodeName").is_none(), "nodeName skips DRA");
        assert_eq!(
            pod["spec"]["nodeSelector"]["kubernetes.io/hostname"],
            "node-a"
        );
        assert_eq!(pod["metadata"]["labels"]["app"], "x");
        assert_eq!(pod["metadata"]["namespace"], "ns");
        let container = &pod["spec"]["containers"][0];
        assert_eq!(container["name"], "c");
        assert_eq!(container["command"][2], IDLE);
        assert_eq!(container["resources"]["limits"]["nvidia.com/gpu"], "2");
        assert!(pod["spec"].get("resourceClaims").is_none());
    }

    #[test]
    fn a_claim_is_declared_in_the_pod_and_asked_for_by_the_container() {
        let templated = pod(Asks::ClaimFromTemplate {
            name: "channel",
            template: "rct",
        });
        assert_eq!(
            templated["spec"]["resourceClaims"],
            json!([{"name": "channel", "resourceClaimTemplateName": "rct"}])
        );
        assert_eq!(
            templated["spec"]["containers"][0]["resources"],
            json!({"claims": [{"name": "channel"}]})
        );
        let named = pod(Asks::Claim {
            name: "gpu",
            claim: "c1",
        });
        assert_eq!(
            named["spec"]["resourceClaims"],
            json!([{"name": "gpu", "resourceClaimName": "c1"}])
        );
        assert_eq!(
            named["spec"]["containers"][0]["resources"],
            json!({"claims": [{"name": "gpu"}]})
        );
    }
}
