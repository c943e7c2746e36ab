//! The typed document, its parsing from YAML and its validation.

use borsh::{BorshDeserialize, BorshSerialize};

use crate::{ClusterUuid, Error, Result};

/// A validated topology document: NVLink domains and the cliques of nodes in them.
///
/// Obtain one from `parse` (YAML, feature `yaml`), [`crate::staged::decode`] or a generator and call [`Topology::validate`]
/// after changing it by hand.
#[derive(Debug, Clone, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Topology {
    /// The document version; always 1.
    pub version: u32,
    /// The domains, in document order (resolution takes the first match).
    pub domains: Vec<Domain>,
}

/// One NVLink domain: every GPU in it reports the domain's cluster uuid.
#[derive(Debug, Clone, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Domain {
    /// A label for people; NVML never reports it. May be empty.
    pub name: String,
    /// The cluster uuid its GPUs report.
    pub uuid: ClusterUuid,
    /// The cliques of the domain.
    pub cliques: Vec<Clique>,
}

/// One clique: the nodes whose GPUs report this clique id.
#[derive(Debug, Clone, PartialEq, Eq, BorshSerialize, BorshDeserialize)]
pub struct Clique {
    /// The clique id its GPUs report.
    pub id: u32,
    /// Kubernetes node names, matched exactly against `NODE_NAME`.
    pub nodes: Vec<String>,
}

/// What a node's GPUs report when the node is in the topology.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Identity {
    /// The domain's uuid.
    pub cluster_uuid: ClusterUuid,
    /// The clique's id.
    pub clique_id: u32,
}

impl Topology {
    /// Checks the rules the types cannot hold: version 1, no empty node name,
    /// no node in two cliques, no two domains with one uuid, no two cliques of
    /// a domain with one id. The first violation in document order wins.
    pub fn validate(&self) -> Result<()> {
        if self.version != 1 {
            return Err(Error::UnsupportedVersion {
                version: u64::from(self.version),
            });
        }
        // An earlier domain, clique or node with the same uuid, id or name is found by a scan:
        // less code in the mock library than a map, and quadratic only in the node count (144
        // nodes of eight racks are some 10,000 comparisons at each init).
        let mut nodes: Vec<(&str, usize, usize)> = Vec::new();
        for (domain_idx, domain) in self.domains.iter().enumerate() {
            let mut earlier = self.domains[..domain_idx].iter();
            if let Some(first) = earlier.position(|other| other.uuid == domain.uuid) {
                return Err(Error::DuplicateUuid {
                    path: format!("domains[{domain_idx}].uuid"),
                    uuid: domain.uuid,
                    first: format!("domains[{first}]"),
                });
            }
            for (clique_idx, clique) in domain.cliques.iter().enumerate() {
                let mut earlier = domain.cliques[..clique_idx].iter();
                if let Some(first) = earlier.position(|other| other.id == clique.id) {
                    return Err(Error::DuplicateCliqueId {
                        path: format!("domains[{domain_idx}].cliques[{clique_idx}].id"),
                        id: clique.id,
                        first: format!("domains[{domain_idx}].cliques[{first}]"),
                    });
                }
                for (node_idx, node) in clique.nodes.iter().enumerate() {
                    let path =
                        || format!("domains[{domain_idx}].cliques[{clique_idx}].nodes[{node_idx}]");
                    if node.trim().is_empty() {
                        return Err(Error::EmptyNodeName { path: path() });
                    }
                    if let Some((_, first_domain, first_clique)) =
                        nodes.iter().find(|(name, _, _)| *name == node.as_str())
                    {
                        return Err(Error::DuplicateNode {
                            path: path(),
                            node: node.clone(),
                            first: format!("domains[{first_domain}].cliques[{first_clique}]"),
                        });
                    }
                    nodes.push((node.as_str(), domain_idx, clique_idx));
                }
            }
        }
        Ok(())
    }

    /// The identity a node's GPUs take, or `None` when the node is in no
    /// clique (its GPUs keep the profile's defaults).
    ///
    /// Matching is exact and case-sensitive; the first match in document
    /// order wins (a validated document has at most one).
    pub fn resolve(&self, node: &str) -> Option<Identity> {
        self.domains.iter().find_map(|domain| {
            domain
                .cliques
                .iter()
                .find(|clique| clique.nodes.iter().any(|member| member == node))
                .map(|clique| Identity {
                    cluster_uuid: domain.uuid,
                    clique_id: clique.id,
                })
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::parse;

    const VALID: &str = "\
version: 1
domains:
  - name: a
    uuid: 00000000-0000-0000-0000-0000000000ab
    cliques:
      - id: 0
        nodes: [n1, n2]
      - id: 4294967295
        nodes:
          - n3
  - name: b
    uuid: 000000000000000000000000000000FF
    cliques:
      - id: 0
        nodes: [n4]
";

    fn error(yaml: &str) -> String {
        parse(yaml)
            .expect_err("document must be rejected")
            .to_string()
    }

    #[test]
    fn valid_document_parses() {
        let topology = parse(VALID).expect("valid document");
        assert_eq!(topology.version, 1);
        assert_eq!(topology.domains.len(), 2);
        assert_eq!(topology.domains[0].name, "a");
        assert_eq!(topology.domains[0].cliques[1].id, u32::MAX);
        assert_eq!(topology.domains[0].cliques[1].nodes, ["n3"]);
        assert_eq!(
            topology.domains[1].uuid.to_string(),
            "00000000-0000-0000-0000-0000000000ff"
        );
    }

    #[test]
    fn resolution_finds_each_node_and_rejects_strangers() {
        let topology = parse(VALID).expect("valid document");
        let ab: ClusterUuid = "00000000-0000-0000-0000-0000000000ab"
            .parse()
            .expect("uuid");
        let ff: ClusterUuid = "00000000-0000-0000-0000-0000000000ff"
            .parse()
            .expect("uuid");
        let expect = [
            ("n1", ab, 0),
            ("n2", ab, 0),
            ("n3", ab, u32::MAX),
            ("n4", ff, 0),
        ];
        for (node, cluster_uuid, clique_id) in expect {
            assert_eq!(
                topology.resolve(node),
                Some(Identity {
                    cluster_uuid,
                    clique_id
                }),
                "{node}"
            );
        }
        assert_eq!(topology.resolve("n5"), None);
        assert_eq!(topology.resolve("N1"), None, "matching is case-sensitive");
        assert_eq!(topology.resolve(""), None);
    }

    #[test]
    fn resolution_takes_the_first_match_in_an_unvalidated_document() {
        let mut topology = parse(VALID).expect("valid document");
        topology.domains[1].cliques[0].nodes.push("n1".to_owned());
        assert_eq!(topology.resolve("n1").map(|id| id.clique_id), Some(0));
        assert_eq!(
            topology.resolve("n1").map(|id| id.cluster_uuid.to_string()),
            Some("00000000-0000-0000-0000-0000000000ab".to_owned())
        );
    }

    #[test]
    fn empty_domain_list_is_valid() {
        let topology = parse("version: 1\ndomains: []\n").expect("valid document");
        assert!(topology.domains.is_empty());
        assert_eq!(topology.resolve("any"), None);
    }

    #[test]
    fn node_in_two_cliques_across_domains_is_named() {
        let yaml = VALID.replace("nodes: [n4]", "nodes: [n4, n5, n2]");
        assert_eq!(
            error(&yaml),
            "domains[1].cliques[0].nodes[2]: node \"n2\" is already in domains[0].cliques[0]"
        );
    }

    #[test]
    fn node_twice_in_one_clique_is_named() {
        let yaml = VALID.replace("nodes: [n1, n2]", "nodes: [n1, n1]");
        assert_eq!(
            error(&yaml),
            "domains[0].cliques[0].nodes[1]: node \"n1\" is already in domains[0].cliques[0]"
        );
    }

    #[test]
    fn duplicate_domain_uuid_is_named_across_spellings() {
        let yaml = VALID.replace(
            "000000000000000000000000000000FF",
            "000000000000000000000000000000AB",
        );
        assert_eq!(
            error(&yaml),
            "domains[1].uuid: uuid 00000000-0000-0000-0000-0000000000ab is already used by domains[0]"
        );
    }

    #[test]
    fn duplicate_clique_id_within_a_domain_is_named() {
        let yaml = VALID.replace("id: 4294967295", "id: 0");
        assert_eq!(
            error(&yaml),
            "domains[0].cliques[1].id: clique id 0 is already used by domains[0].cliques[0]"
        );
    }

    #[test]
    fn same_clique_id_in_two_domains_is_fine() {
        let topology = parse(VALID).expect("valid document");
        assert_eq!(
            topology.domains[0].cliques[0].id,
            topology.domains[1].cliques[0].id
        );
    }

    #[test]
    fn malformed_uuid_is_named() {
        let yaml = VALID.replace("000000000000000000000000000000FF", "0000-00ff");
        assert_eq!(
            error(&yaml),
            "domains[1].uuid: malformed uuid \"0000-00ff\": expected 8-4-4-4-12 hex digits with dashes or 32 bare hex digits"
        );
    }

    #[test]
    fn clique_id_outside_u32_is_named_with_the_range() {
        for (id, shown) in [
            ("-1", "-1"),
            ("4294967296", "4294967296"),
            ("1.5", "1.5"),
            ("\"7\"", "\"7\""),
            ("[1]", "(a sequence)"),
            ("{a: 1}", "(a mapping)"),
            ("true", "true"),
            ("!x 1", "(a tagged value)"),
        ] {
            let yaml = VALID.replace("id: 4294967295", &format!("id: {id}"));
            assert_eq!(
                error(&yaml),
                format!(
                    "domains[0].cliques[1].id: clique id {shown} is out of range: it must be an integer from 0 to 4294967295 (u32)"
                ),
                "{id}"
            );
        }
    }

    #[test]
    fn missing_clique_id_is_named() {
        let yaml = VALID.replace("- id: 4294967295\n        nodes:", "- nodes:");
        let err = error(&yaml);
        assert!(
            err.starts_with("domains[0].cliques[1].id: clique id (missing)"),
            "{err}"
        );
    }

    #[test]
    fn empty_node_name_is_named() {
        for empty in ["\"\"", "\"  \""] {
            let yaml = VALID.replace("nodes: [n1, n2]", &format!("nodes: [n1, {empty}]"));
            assert_eq!(
                error(&yaml),
                "domains[0].cliques[0].nodes[1]: node name is empty"
            );
        }
    }

    #[test]
    fn unknown_keys_are_rejected_at_every_level() {
        let top = error(&format!("{VALID}extra: 1\n"));
        assert!(top.contains("unknown field `extra`"), "{top}");
        let domain = error(&VALID.replace("  - name: b\n", "  - name: b\n    colour: red\n"));
        assert!(domain.contains("domains[1]"), "{domain}");
        assert!(domain.contains("unknown field `colour`"), "{domain}");
        let clique = error(&VALID.replace(
            "      - id: 0\n        nodes: [n4]",
            "      - id: 0\n        state: up\n        nodes: [n4]",
        ));
        assert!(clique.contains("domains[1].cliques[0]"), "{clique}");
        assert!(clique.contains("unknown field `state`"), "{clique}");
    }

    #[test]
    fn unsupported_version_is_rejected() {
        assert_eq!(
            error(&VALID.replace("version: 1", "version: 2")),
            "version: unsupported topology version 2: only version 1 exists"
        );
        let missing = error("domains: []\n");
        assert!(missing.contains("missing field `version`"), "{missing}");
    }

    #[test]
    fn wrong_shapes_are_syntax_errors() {
        for bad in ["", "[]", "version: 1\ndomains: {}\n", "version: [\n"] {
            let err = parse(bad).expect_err(bad);
            assert!(matches!(err, Error::Syntax { .. }), "{bad:?}: {err}");
        }
    }

    #[test]
    fn validate_catches_hand_made_mistakes() {
        let mut topology = parse(VALID).expect("valid document");
        topology.version = 3;
        assert_eq!(
            topology.validate(),
            Err(Error::UnsupportedVersion { version: 3 })
        );
        topology.version = 1;
        topology.domains[0].cliques[0].nodes[0] = String::new();
        assert_eq!(
            topology.validate(),
            Err(Error::EmptyNodeName {
                path: "domains[0].cliques[0].nodes[0]".to_owned()
            })
        );
    }
}
