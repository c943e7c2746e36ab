//! Reading a topology document from YAML (feature `yaml`, on by default; the mock NVML library
//! turns it off and reads staged documents, [`crate::staged`]).

use serde::Deserialize;
use serde_yaml::Value;

use crate::{Clique, ClusterUuid, Domain, Error, Result, Topology};

/// Parses and validates a topology document.
///
/// The YAML is read into a `serde_yaml::Value` and the raw document taken from it by reference
/// (one set of deserialisers, for `&Value`: 17 kB less in the mock library when it still parsed YAML).
/// Unknown keys are looked for first, by [`unknown_key`], so that the message names the entry
/// (`domains[1].cliques[0]: unknown field ...`) as the event-stream deserialiser's did.
pub fn parse(yaml: &str) -> Result<Topology> {
    let syntax = |message: String| Error::Syntax { message };
    let value: Value = serde_yaml::from_str(yaml).map_err(|err| syntax(err.to_string()))?;
    if let Some(message) = unknown_key(&value) {
        return Err(syntax(message));
    }
    let raw = RawTopology::deserialize(&value).map_err(|err| syntax(err.to_string()))?;
    let topology = raw.into_topology()?;
    topology.validate()?;
    Ok(topology)
}

/// The first key the schema does not know, as `<path>: unknown field `k`, expected one of ...`;
/// entries of the wrong shape are left to the deserialiser.
fn unknown_key(document: &Value) -> Option<String> {
    const TOP: &[&str] = &["version", "domains"];
    const DOMAIN: &[&str] = &["name", "uuid", "cliques"];
    const CLIQUE: &[&str] = &["id", "nodes"];
    let unknown = |path: &str, value: &Value, known: &[&str]| {
        let map = value.as_mapping()?;
        let key = map
            .keys()
            .find(|key| !key.as_str().is_some_and(|k| known.contains(&k)))?;
        let name = key
            .as_str()
            .map_or_else(|| format!("{key:?}"), str::to_owned);
        let expected: Vec<String> = known.iter().map(|k| format!("`{k}`")).collect();
        let prefix = if path.is_empty() {
            String::new()
        } else {
            format!("{path}: ")
        };
        Some(format!(
            "{prefix}unknown field `{name}`, expected one of {}",
            expected.join(", ")
        ))
    };
    if let Some(found) = unknown("", document, TOP) {
        return Some(found);
    }
    for (d, domain) in entries(document.get("domains")).iter().enumerate() {
        if let Some(found) = unknown(&format!("domains[{d}]"), domain, DOMAIN) {
            return Some(found);
        }
        for (c, clique) in entries(domain.get("cliques")).iter().enumerate() {
            if let Some(found) = unknown(&format!("domains[{d}].cliques[{c}]"), clique, CLIQUE) {
                return Some(found);
            }
        }
    }
    None
}

/// The entries of a list, or none when the value is absent or not a list (the deserialiser
/// reports a wrong shape).
fn entries(value: Option<&Value>) -> &[Value] {
    value
        .and_then(Value::as_sequence)
        .map_or(&[], |list| list.as_slice())
}

/// The document as written, before the checks that need a path in their message.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawTopology {
    version: u64,
    #[serde(default)]
    domains: Vec<RawDomain>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawDomain {
    #[serde(default)]
    name: String,
    uuid: String,
    #[serde(default)]
    cliques: Vec<RawClique>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct RawClique {
    // A `Value` so that a negative or too large id gets our message (with the
    // u32 range) instead of serde's.
    id: Option<serde_yaml::Value>,
    #[serde(default)]
    nodes: Vec<String>,
}

impl RawTopology {
    fn into_topology(self) -> Result<Topology> {
        let version = match u32::try_from(self.version) {
            Ok(1) => 1,
            _ => {
                return Err(Error::UnsupportedVersion {
                    version: self.version,
                })
            }
        };
        let mut domains = Vec::with_capacity(self.domains.len());
        for (domain_idx, raw) in self.domains.into_iter().enumerate() {
            let uuid = match raw.uuid.parse::<ClusterUuid>() {
                Ok(uuid) => uuid,
                Err(err) => {
                    return Err(Error::MalformedUuid {
                        path: format!("domains[{domain_idx}].uuid"),
                        value: err.value,
                    })
                }
            };
            let mut cliques = Vec::with_capacity(raw.cliques.len());
            for (clique_idx, clique) in raw.cliques.into_iter().enumerate() {
                let path = format!("domains[{domain_idx}].cliques[{clique_idx}].id");
                let id = clique_id(clique.id, path)?;
                cliques.push(Clique {
                    id,
                    nodes: clique.nodes,
                });
            }
            domains.push(Domain {
                name: raw.name,
                uuid,
                cliques,
            });
        }
        Ok(Topology { version, domains })
    }
}

fn clique_id(value: Option<serde_yaml::Value>, path: String) -> Result<u32> {
    let value = match value {
        None | Some(serde_yaml::Value::Null) => {
            return Err(Error::CliqueIdOutOfRange {
                path,
                value: "(missing)".to_owned(),
            })
        }
        Some(value) => value,
    };
    if let serde_yaml::Value::Number(number) = &value {
        if let Some(id) = number.as_u64().and_then(|id| u32::try_from(id).ok()) {
            return Ok(id);
        }
        return Err(Error::CliqueIdOutOfRange {
            path,
            value: number.to_string(),
        });
    }
    // Described without serialising it back to YAML: that would link the YAML emitter into the
    // mock NVML library, which only parses.
    let shown = match &value {
        serde_yaml::Value::String(text) => format!("{text:?}"),
        serde_yaml::Value::Bool(flag) => flag.to_string(),
        serde_yaml::Value::Sequence(_) => "(a sequence)".to_owned(),
        serde_yaml::Value::Mapping(_) => "(a mapping)".to_owned(),
        _ => "(a tagged value)".to_owned(),
    };
    Err(Error::CliqueIdOutOfRange { path, value: shown })
}
