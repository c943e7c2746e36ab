//! The double's own line protocol (not NVIDIA's gRPC): one request line on
//! the command port, one answer, then the connection closes; on the peer port
//! a `HELLO`, a `WELCOME`, then `PING` lines both ways until `BYE` or EOF.
//! Each `PING` carries the sender's [`View`], so every member knows the
//! domain from its own links, as NVIDIA's daemons learn it over theirs.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

use crate::domain::View;

/// Command port: the local state word (`-q`).
pub const QUERY: &str = "QUERY";
/// Command port: this member's [`crate::domain::View`] as one JSON line.
pub const VIEW: &str = "VIEW";
/// Command port: the domain document as JSON (`-N -j`).
pub const DOMAIN_JSON: &str = "DOMAIN json";
/// Command port: the domain document as text (`-N`).
pub const DOMAIN_TEXT: &str = "DOMAIN text";

/// Peer port: `HELLO <from index> <nodes digest>`.
pub fn hello(from: usize, digest: &str) -> String {
    format!("HELLO {from} {digest}\n")
}

/// Parses a `HELLO` line into (index, digest).
pub fn parse_hello(line: &str) -> Option<(usize, String)> {
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next(), parts.next(), parts.next()) {
        (Some("HELLO"), Some(idx), Some(digest), None) => {
            Some((idx.parse().ok()?, digest.to_owned()))
        }
        _ => None,
    }
}

/// Peer port: accepted.
pub const WELCOME: &str = "WELCOME";
/// Peer port: refused, the nodes files differ (`!M!`).
pub const MISMATCH: &str = "MISMATCH";
/// Peer port: keep-alive, carrying the sender's view.
pub const PING: &str = "PING";

/// Peer port: `PING <the sender's view as one JSON line>`.
pub fn ping(view: &View) -> String {
    format!(
        "{PING} {}\n",
        serde_json::to_string(view).unwrap_or_default()
    )
}

/// The view a `PING` line carries; `None` for any other line.
pub fn parse_ping(line: &str) -> Option<View> {
    let json = line.strip_prefix(PING)?.trim();
    serde_json::from_str(json).ok()
}
/// Peer port: graceful goodbye (SIGTERM).
pub const BYE: &str = "BYE";

/// One request on a command port, answered within `limit` (blocking; the ctl).
pub fn request(addr: SocketAddr, line: &str, limit: Duration) -> std::io::Result<String> {
    let mut stream = TcpStream::connect_timeout(&addr, limit)?;
    stream.set_read_timeout(Some(limit))?;
    stream.set_write_timeout(Some(limit))?;
    stream.write_all(format!("{line}\n").as_bytes())?;
    stream.shutdown(std::net::Shutdown::Write)?;
    let mut answer = String::new();
    stream.read_to_string(&mut answer)?;
    Ok(answer)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hello_round_trips() {
        assert_eq!(
            parse_hello(hello(3, "abc").trim()),
            Some((3, "abc".to_owned()))
        );
        assert_eq!(parse_hello("HELLO x abc"), None);
        assert_eq!(parse_hello("HELLO 1 abc extra"), None);
    }

    #[test]
    fn ping_carries_the_view() {
        let view = View {
            state: crate::domain::LocalState::Ready,
            version: crate::NO_GPU_VERSION.to_owned(),
            connected: [0, 2, 17].into_iter().collect(),
        };
        let line = ping(&view);
        assert!(
            line.starts_with("PING {") && line.ends_with("}\n"),
            "{line}"
        );
        assert_eq!(parse_ping(line.trim()), Some(view));
        assert_eq!(parse_ping("PING"), None);
        assert_eq!(parse_ping("BYE"), None);
        assert_eq!(parse_ping("PING {not json"), None);
    }
}
