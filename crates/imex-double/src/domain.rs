//! The domain's state and the `-N -j` document (nvml-abi-and-imex §13.3):
//! `{"nodes": {"<index>": {status, host, hostName, connections, changed,
//! version}}, "timestamp", "status"}`, top-level `status` last.

use std::collections::BTreeSet;

use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};

/// A daemon's own state, as `-q` prints it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "SCREAMING_SNAKE_CASE")]
pub enum LocalState {
    /// Reading its config.
    Initializing,
    /// Serving.
    Ready,
    /// SIGTERM received.
    ShuttingDown,
    /// Not answering (how a dead member is shown).
    Unavailable,
}

impl LocalState {
    /// The word `-q` prints.
    pub fn word(self) -> &'static str {
        match self {
            LocalState::Initializing => "INITIALIZING",
            LocalState::Ready => "READY",
            LocalState::ShuttingDown => "SHUTTING_DOWN",
            LocalState::Unavailable => "UNAVAILABLE",
        }
    }
}

/// The domain status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum DomainState {
    /// Every member READY and connected to every other.
    Up,
    /// Some member READY, not all of them connected.
    Degraded,
    /// No member READY.
    Down,
}

/// What one member says of itself (the double's `VIEW` answer).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct View {
    /// Its own state.
    pub state: LocalState,
    /// Its version (`NO_GPU`).
    pub version: String,
    /// The indices it holds a live peer connection with.
    pub connected: BTreeSet<usize>,
}

/// One member as seen by the daemon answering `-N`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    /// The nodes-file entry's address; `None` for a host name that does not
    /// resolve (yet): a slot of NVIDIA's compute-domain daemon's static nodes
    /// file (`compute-domain-daemon-%04d`, `IMEXDaemonsWithDNSNames`) that no
    /// daemon holds. Such a slot is listed, UNAVAILABLE with an empty host,
    /// and does not count towards the domain state (the double's choice: how
    /// NVIDIA's daemon counts an unresolvable name is not documented).
    pub host: Option<String>,
    /// What it said, or `None` when it did not answer.
    pub view: Option<View>,
}

/// The domain state from the view of every member whose name resolves.
pub fn state(members: &[Member]) -> DomainState {
    let counted: Vec<usize> = (0..members.len())
        .filter(|idx| members[*idx].host.is_some())
        .collect();
    let ready = |idx: &usize| {
        members[*idx]
            .view
            .as_ref()
            .is_some_and(|v| v.state == LocalState::Ready)
    };
    let all_connected = counted.iter().all(|idx| {
        members[*idx].view.as_ref().is_some_and(|v| {
            counted
                .iter()
                .filter(|other| *other != idx)
                .all(|other| v.connected.contains(other))
        })
    });
    if counted.is_empty() {
        DomainState::Down
    } else if counted.iter().all(ready) && all_connected {
        DomainState::Up
    } else if counted.iter().any(ready) {
        DomainState::Degraded
    } else {
        DomainState::Down
    }
}

/// The `-N -j` document.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Document {
    /// Members keyed by decimal index, in index order.
    pub nodes: Nodes,
    /// `M/D/YYYY HH:MM:SS.mmm`.
    pub timestamp: String,
    /// The domain status (last, as consumers expect).
    pub status: DomainState,
}

/// The `nodes` object: keys in index order ("0", "1", …, "10").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nodes(pub Vec<NodeEntry>);

/// One `nodes` entry.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct NodeEntry {
    /// READY, UNAVAILABLE, …
    pub status: String,
    /// Its IP.
    pub host: String,
    /// Host name (only with `-H`; else empty).
    #[serde(rename = "hostName")]
    pub host_name: String,
    /// Its connections keyed by peer index.
    pub connections: Connections,
    /// Whether the entry changed since the last report.
    pub changed: bool,
    /// `NO_GPU`, a driver version, or empty for a dead member.
    pub version: String,
}

/// A member's connections, keyed by peer index.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Connections(pub Vec<(usize, Connection)>);

/// One connection.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Connection {
    /// The peer's IP.
    pub host: String,
    /// CONNECTED or INVALID.
    pub status: String,
    /// Whether it changed since the last report.
    pub changed: bool,
}

impl Serialize for Nodes {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (idx, entry) in self.0.iter().enumerate() {
            map.serialize_entry(&idx.to_string(), entry)?;
        }
        map.end()
    }
}

impl Serialize for Connections {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        let mut map = serializer.serialize_map(Some(self.0.len()))?;
        for (idx, conn) in &self.0 {
            map.serialize_entry(&idx.to_string(), conn)?;
        }
        map.end()
    }
}

/// Builds the document: absent members are UNAVAILABLE with an empty
/// version and INVALID connections.
pub fn document(members: &[Member], timestamp: String) -> Document {
    let entries = members
        .iter()
        .enumerate()
        .map(|(idx, member)| {
            let connections = members
                .iter()
                .enumerate()
                .filter(|(other, _)| *other != idx)
                .map(|(other, peer)| {
                    let up = member
                        .view
                        .as_ref()
                        .is_some_and(|v| v.connected.contains(&other));
                    (
                        other,
                        Connection {
                            host: peer.host.clone().unwrap_or_default(),
                            status: if up { "CONNECTED" } else { "INVALID" }.to_owned(),
                            changed: true,
                        },
                    )
                })
                .collect();
            let (status, version) = match &member.view {
                Some(view) => (view.state.word().to_owned(), view.version.clone()),
                None => (LocalState::Unavailable.word().to_owned(), String::new()),
            };
            NodeEntry {
                status,
                host: member.host.clone().unwrap_or_default(),
                host_name: String::new(),
                connections: Connections(connections),
                changed: true,
                version,
            }
        })
        .collect();
    Document {
        nodes: Nodes(entries),
        timestamp,
        status: state(members),
    }
}

/// The `-N` text form: legend, timestamp, one line per node, the matrix and
/// `Domain State: …`.
pub fn text(doc: &Document) -> String {
    let mut out = String::from(
        "Connectivity Table Legend:\nI - Invalid - Node wasn't reachable, no connection status available\n\
         N - Never Connected\nR - Recovering - Connection was lost, but clean up has not yet been triggered.\n\
         D - Disconnected - Connection was lost, and clean up has been triggreed.\n\
         A - Authenticating - If GSSAPI enabled, client has initiated mutual authentication.\n\
         !V! - Version mismatch, communication disabled.\n!M! - Node map mismatch, communication disabled.\n\
         C - Connected - Ready for operation\n\n",
    );
    out.push_str(&doc.timestamp);
    out.push_str("\nNodes:\n");
    for (idx, node) in doc.nodes.0.iter().enumerate() {
        out.push_str(&format!(
            "Node #{idx}   - {:<15} - {:<12} - Version: {}\n",
            node.host, node.status, node.version
        ));
    }
    out.push_str("\n Nodes From\\To  ");
    for idx in 0..doc.nodes.0.len() {
        out.push_str(&format!("{idx:>4}"));
    }
    out.push('\n');
    for (idx, node) in doc.nodes.0.iter().enumerate() {
        out.push_str(&format!("       {idx:<8}"));
        for other in 0..doc.nodes.0.len() {
            let cell = match node.connections.0.iter().find(|(it, _)| *it == other) {
                None => "C",
                Some((_, conn)) if conn.status == "CONNECTED" => "C",
                Some(_) => "I",
            };
            out.push_str(&format!("{cell:>4}"));
        }
        out.push('\n');
    }
    let state = match doc.status {
        DomainState::Up => "UP",
        DomainState::Degraded => "DEGRADED",
        DomainState::Down => "DOWN",
    };
    out.push_str(&format!("\nDomain State: {state}\n"));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ready(connected: &[usize]) -> Option<View> {
        Some(View {
            state: LocalState::Ready,
            version: crate::NO_GPU_VERSION.to_owned(),
            connected: connected.iter().copied().collect(),
        })
    }

    fn member(host: &str, view: Option<View>) -> Member {
        Member {
            host: Some(host.to_owned()),
            view,
        }
    }

    fn unresolved() -> Member {
        Member {
            host: None,
            view: None,
        }
    }

    #[test]
    fn unresolved_slots_are_listed_but_not_counted() {
        // Two live daemons in a static nodes file of four names.
        let members = [
            member("10.0.0.1", ready(&[1])),
            member("10.0.0.2", ready(&[0])),
            unresolved(),
            unresolved(),
        ];
        assert_eq!(state(&members), DomainState::Up);
        let doc = document(&members, String::new());
        assert_eq!(doc.nodes.0.len(), 4);
        assert_eq!(doc.nodes.0[2].status, "UNAVAILABLE");
        assert_eq!(doc.nodes.0[2].host, "");
        assert_eq!(doc.nodes.0[0].connections.0[2].1.status, "INVALID");
        // One of the two live ones gone: no longer up.
        let members = [
            member("10.0.0.1", ready(&[])),
            member("10.0.0.2", None),
            unresolved(),
        ];
        assert_eq!(state(&members), DomainState::Degraded);
        assert_eq!(state(&[unresolved(), unresolved()]), DomainState::Down);
    }

    #[test]
    fn up_only_when_every_member_is_ready_and_connected() {
        let up = [member("a", ready(&[1])), member("b", ready(&[0]))];
        assert_eq!(state(&up), DomainState::Up);
        let alone = [member("a", ready(&[])), member("b", None)];
        assert_eq!(state(&alone), DomainState::Degraded);
        let half = [member("a", ready(&[1])), member("b", ready(&[]))];
        assert_eq!(state(&half), DomainState::Degraded);
        assert_eq!(
            state(&[member("a", None), member("b", None)]),
            DomainState::Down
        );
    }

    #[test]
    fn the_document_has_the_documented_shape() {
        let doc = document(
            &[member("10.0.0.1", ready(&[])), member("10.0.0.2", None)],
            "9/4/2026 00:37:39.905".to_owned(),
        );
        let json = serde_json::to_string(&doc).expect("json");
        assert_eq!(
            json,
            r#"{"nodes":{"0":{"status":"READY","host":"10.0.0.1","hostName":"","connections":{"1":{"host":"10.0.0.2","status":"INVALID","changed":true}},"changed":true,"version":"NO_GPU"},"1":{"status":"UNAVAILABLE","host":"10.0.0.2","hostName":"","connections":{"0":{"host":"10.0.0.1","status":"INVALID","changed":true}},"changed":true,"version":""}},"timestamp":"9/4/2026 00:37:39.905","status":"DEGRADED"}"#
        );
        assert!(text(&doc).ends_with("\nDomain State: DEGRADED\n"));
    }

    #[test]
    fn keys_follow_index_order_past_nine() {
        let members: Vec<Member> = (0..11).map(|i| member(&format!("h{i}"), None)).collect();
        let json = serde_json::to_string(&document(&members, String::new())).expect("json");
        let ten = json.find(r#""10":{"status""#).expect("10");
        let two = json.find(r#""2":{"status""#).expect("2");
        assert!(two < ten, "{json}");
    }
}
