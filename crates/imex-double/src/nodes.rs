//! The nodes file: one IPv4, IPv6 or host name per line; line order is the
//! node index; byte-identical on every member (nvml-abi-and-imex §10).

use std::io::ErrorKind;
use std::net::{IpAddr, TcpListener, ToSocketAddrs};
use std::sync::Mutex;

use sha2::{Digest, Sha256};

use crate::{Error, Result};

/// The nodes file as read.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Nodes {
    /// The entries, in order (index = position).
    pub entries: Vec<String>,
    /// sha256 of the file's bytes: members compare it (node map).
    pub digest: String,
}

impl Nodes {
    /// Parses the file's text; blank lines and `#` comments are skipped.
    pub fn parse(text: &str) -> Nodes {
        let entries = text
            .lines()
            .map(str::trim)
            .filter(|it| !it.is_empty() && !it.starts_with('#'))
            .map(str::to_owned)
            .collect();
        let digest = Sha256::digest(text.as_bytes())
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect();
        Nodes { entries, digest }
    }
}

/// How an entry was taken, for the log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EntryKind {
    /// A literal IP address.
    Address,
    /// A host name, resolved through the system resolver.
    HostName,
}

/// Resolves an entry to one address.
pub fn resolve(entry: &str) -> Result<(IpAddr, EntryKind)> {
    if let Ok(ip) = entry.parse::<IpAddr>() {
        return Ok((ip, EntryKind::Address));
    }
    let mut addrs = (entry, 0u16)
        .to_socket_addrs()
        .map_err(|err| Error::Resolve {
            entry: entry.to_owned(),
            reason: err.to_string(),
        })?;
    match addrs.next() {
        Some(addr) => Ok((addr.ip(), EntryKind::HostName)),
        None => Err(Error::Resolve {
            entry: entry.to_owned(),
            reason: "no address".to_owned(),
        }),
    }
}

/// Whether `ip` is an address of this host: binding a socket to it succeeds
/// only then (EADDRNOTAVAIL otherwise).
pub fn is_local(ip: IpAddr) -> bool {
    match TcpListener::bind((ip, 0)) {
        Ok(_) => true,
        Err(err) => err.kind() != ErrorKind::AddrNotAvailable,
    }
}

/// This node's index: the position of `bind` when set, else of the first
/// entry that is a local address; entries that do not resolve are skipped.
pub fn own_index(resolved: &[Option<IpAddr>], bind: Option<IpAddr>) -> Option<usize> {
    match bind {
        Some(bind) => resolved.iter().position(|it| *it == Some(bind)),
        None => resolved.iter().position(|it| it.is_some_and(is_local)),
    }
}

/// The address of every entry of the nodes file, as the resolver gives it
/// now. A host name that does not resolve is `None`, not an error: NVIDIA's
/// compute-domain daemon writes a static nodes file of
/// `compute-domain-daemon-%04d` names (`IMEXDaemonsWithDNSNames`) and maps
/// only the live ones in `/etc/hosts`, sending SIGUSR1 when the mapping
/// changes; the daemon resolves a name again before each connection attempt.
#[derive(Debug)]
pub struct HostTable {
    entries: Vec<String>,
    addrs: Mutex<Vec<Option<IpAddr>>>,
}

impl HostTable {
    /// Resolves every entry once.
    pub fn new(entries: Vec<String>) -> HostTable {
        let addrs = entries.iter().map(|it| lookup(it)).collect();
        HostTable {
            entries,
            addrs: Mutex::new(addrs),
        }
    }

    /// The entries, in order.
    pub fn entries(&self) -> &[String] {
        &self.entries
    }

    /// Each entry's address as last resolved.
    pub fn snapshot(&self) -> Vec<Option<IpAddr>> {
        self.addrs.lock().map(|it| it.clone()).unwrap_or_default()
    }

    /// Entry `idx`'s address as last resolved.
    pub fn get(&self, idx: usize) -> Option<IpAddr> {
        self.snapshot().get(idx).copied().flatten()
    }

    /// Resolves entry `idx` again (blocking: the system resolver); returns
    /// the address and whether it changed.
    pub fn refresh(&self, idx: usize) -> (Option<IpAddr>, bool) {
        let now = self.entries.get(idx).and_then(|it| lookup(it));
        let Ok(mut addrs) = self.addrs.lock() else {
            return (now, false);
        };
        match addrs.get_mut(idx) {
            Some(slot) if *slot != now => {
                *slot = now;
                (now, true)
            }
            _ => (now, false),
        }
    }

    /// Takes `ip` for entry `idx` when its name does not resolve here: the
    /// address a live link to that peer comes from. A later resolution
    /// replaces it.
    pub fn learn(&self, idx: usize, ip: IpAddr) {
        if let Ok(mut addrs) = self.addrs.lock() {
            if let Some(slot @ None) = addrs.get_mut(idx) {
                *slot = Some(ip);
            }
        }
    }
}

fn lookup(entry: &str) -> Option<IpAddr> {
    resolve(entry).ok().map(|(ip, _)| ip)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entries_keep_their_order_and_the_digest_covers_the_bytes() {
        let a = Nodes::parse("10.0.0.1\n10.0.0.2\n");
        assert_eq!(a.entries, ["10.0.0.1", "10.0.0.2"]);
        let b = Nodes::parse("10.0.0.1\n10.0.0.2");
        assert_ne!(a.digest, b.digest, "byte-identical, not just equal entries");
        assert_eq!(Nodes::parse("# x\n\n a \n").entries, ["a"]);
    }

    #[test]
    fn unresolvable_names_wait_in_the_table_and_are_skipped_for_the_own_index() {
        let table = HostTable::new(vec![
            "no-such-host-0000.invalid".to_owned(),
            "127.0.0.1".to_owned(),
        ]);
        assert_eq!(table.get(0), None);
        assert_eq!(table.get(1), Some("127.0.0.1".parse().expect("ip")));
        assert_eq!(table.refresh(0), (None, false));
        let linked: IpAddr = "10.244.3.4".parse().expect("ip");
        table.learn(0, linked);
        table.learn(1, linked);
        assert_eq!(table.get(0), Some(linked), "a linked peer's address");
        assert_eq!(
            table.get(1),
            Some("127.0.0.1".parse().expect("ip")),
            "a resolved name wins"
        );
        assert_eq!(own_index(&table.snapshot(), None), Some(1));
        assert_eq!(table.entries().len(), 2);
    }

    #[test]
    fn own_index_matches_a_local_address() {
        let ips: Vec<Option<IpAddr>> = ["192.0.2.1", "127.0.0.1"]
            .iter()
            .map(|it| Some(it.parse().expect("ip")))
            .collect();
        assert_eq!(own_index(&ips, None), Some(1));
        assert_eq!(own_index(&ips[..1], None), None, "TEST-NET-1 is not local");
        assert_eq!(own_index(&ips, ips[0]), Some(0));
    }

    #[test]
    fn host_names_resolve_through_the_system() {
        assert_eq!(
            resolve("localhost").expect("localhost").1,
            EntryKind::HostName
        );
        assert_eq!(resolve("10.1.2.3").expect("ip").1, EntryKind::Address);
        assert!(resolve("no-such-host.invalid").is_err());
    }
}
