//! The double's own line protocol (not NVIDIA's gRPC): one request line on
//! the command port, one answer, then the connection closes; on the peer port
//! a `HELLO`, a `WELCOME`, then `PING` lines both ways until `BYE` or EOF.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::time::Duration;

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
/// Peer port: keep-alive.
pub const PING: &str = "PING";
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
}
