//! Scenario 4's IMEX part, pure: reading what a live ComputeDomain shows
//! (its status and nodes, the workload's claimed channel and the devices its
//! container holds, the daemon's `/etc/hosts` names, the IMEX domain of
//! `nvidia-imex-ctl -N -j`) and judging it against the [`DomainPlan`].
//!
//! The cluster I/O that feeds these is [`super::imex`].

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;

use crate::imex::{Domain, DomainStatus};

/// The name NVIDIA's daemon gives each slot of its nodes file
/// (`IMEXDaemonsWithDNSNames`): `compute-domain-daemon-%04d`.
pub const DAEMON_NAME_PREFIX: &str = "compute-domain-daemon-";

/// The directory of the IMEX channel devices in a container.
pub use node_layout::paths::CHANNEL_DEVICE_DIR as CHANNELS_DIR;

/// One node of the ComputeDomain's `status.nodes`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CdNode {
    /// The daemon's pod IP.
    pub ip: String,
    /// Its clique id.
    pub clique: String,
    /// `Ready` or `NotReady`.
    pub status: String,
}

/// The ComputeDomain's `status.nodes`, by node name.
pub fn cd_nodes(cd: &Value) -> BTreeMap<String, CdNode> {
    cd["status"]["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|node| {
            let text = |key: &str| node[key].as_str().unwrap_or_default().to_owned();
            let name = node["name"].as_str()?.to_owned();
            Some((
                name,
                CdNode {
                    ip: text("ipAddress"),
                    clique: text("cliqueID"),
                    status: text("status"),
                },
            ))
        })
        .collect()
}

/// Whether the ComputeDomain is Ready with one Ready node entry per node of
/// the plan, each in its node's clique; `Err` says what is not so (yet).
pub fn judge_cd(
    status: &str,
    nodes: &BTreeMap<String, CdNode>,
    want: &BTreeMap<String, String>,
) -> Result<(), String> {
    let listed: BTreeSet<&String> = nodes.keys().collect();
    let wanted: BTreeSet<&String> = want.keys().collect();
    if listed != wanted {
        return Err(format!(
            "status {status:?}, status.nodes lists {listed:?}, the domain's trays are {wanted:?}"
        ));
    }
    for (name, node) in nodes {
        if Some(&node.clique) != want.get(name) {
            return Err(format!(
                "{name} is listed in clique {:?}, its tray is in {:?}",
                node.clique,
                want.get(name)
            ));
        }
        if node.status != "Ready" {
            return Err(format!("{name}'s daemon is {:?}", node.status));
        }
    }
    if status != "Ready" {
        return Err(format!(
            "every node Ready, the domain's status is {status:?}"
        ));
    }
    Ok(())
}

/// The channel a claim was allocated: its `channel-<N>` device.
pub fn claimed_channel(claim: &Value) -> Option<u32> {
    claim["status"]["allocation"]["devices"]["results"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|result| result["device"].as_str())
        .find_map(|device| device.strip_prefix("channel-")?.parse().ok())
}

/// A character device as `ls -ln` lists it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CharDevice {
    /// The file name.
    pub name: String,
    /// Major and minor numbers.
    pub major: u32,
    /// Minor number.
    pub minor: u32,
}

/// The entries of `ls -ln DIR` (busybox or coreutils): character devices
/// with their numbers; any other entry is an `Err` naming it.
pub fn listed_devices(ls: &str) -> Result<Vec<CharDevice>, String> {
    let mut out = Vec::new();
    for line in ls.lines().map(str::trim) {
        if line.is_empty() || line.starts_with("total") {
            continue;
        }
        let fields: Vec<&str> = line.split_whitespace().collect();
        let name = fields.last().copied().unwrap_or_default().to_owned();
        let numbers = fields
            .iter()
            .position(|it| it.ends_with(','))
            .and_then(|at| Some((fields[at].trim_end_matches(','), *fields.get(at + 1)?)));
        match (line.starts_with('c'), numbers) {
            (true, Some((major, minor))) => out.push(CharDevice {
                name,
                major: major.parse().map_err(|_| format!("not a major: {line}"))?,
                minor: minor.parse().map_err(|_| format!("not a minor: {line}"))?,
            }),
            _ => return Err(format!("not a character device: {line:?}")),
        }
    }
    Ok(out)
}

/// Whether a container holds exactly its claimed channel (`channel<N>`,
/// major `major`, minor `N`) and no other IMEX channel.
pub fn judge_channels(devices: &[CharDevice], channel: u32, major: u32) -> Result<(), String> {
    let want = CharDevice {
        name: format!("channel{channel}"),
        major,
        minor: channel,
    };
    match devices {
        [only] if *only == want => Ok(()),
        _ => Err(format!(
            "{CHANNELS_DIR} holds {devices:?}; the claim gives exactly {want:?}"
        )),
    }
}

/// The IMEX channels' major in a `/proc/devices` text.
pub fn channels_major(proc_devices: &str) -> Option<u32> {
    let used = node_layout::proc_devices::used_majors(proc_devices).ok()?;
    used.into_iter()
        .find(|(_, name)| name == node_layout::proc_devices::CHANNELS_NAME)
        .map(|(major, _)| major)
}

/// The daemon slot names of an `/etc/hosts` and the address each maps to.
pub fn daemon_hosts(hosts: &str) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    for line in hosts.lines() {
        let line = line.split('#').next().unwrap_or_default();
        let mut fields = line.split_whitespace();
        let Some(ip) = fields.next() else { continue };
        for name in fields.filter(|it| it.starts_with(DAEMON_NAME_PREFIX)) {
            out.insert(name.to_owned(), ip.to_owned());
        }
    }
    out
}

/// Whether a daemon's `/etc/hosts` maps its nodes file's names to exactly
/// the daemons of its clique (`peers`: their pod IPs).
pub fn judge_hosts(
    mapped: &BTreeMap<String, String>,
    peers: &BTreeSet<String>,
) -> Result<(), String> {
    let ips: BTreeSet<String> = mapped.values().cloned().collect();
    if &ips == peers && mapped.len() == peers.len() {
        Ok(())
    } else {
        Err(format!(
            "/etc/hosts maps {mapped:?}; the clique's daemons are {peers:?}"
        ))
    }
}

/// Whether `-N -j`'s domain is UP with exactly `peers` READY (slots no
/// daemon holds may be listed UNAVAILABLE with no host).
pub fn judge_domain(domain: &Domain, peers: &BTreeSet<String>) -> Result<(), String> {
    let ready: BTreeSet<String> = domain
        .nodes
        .values()
        .filter(|it| it.status == "READY")
        .map(|it| it.host.clone())
        .collect();
    let others: Vec<String> = domain
        .nodes
        .values()
        .filter(|it| it.status != "READY" && !it.host.is_empty())
        .map(|it| format!("{} {}", it.host, it.status))
        .collect();
    if domain.status != DomainStatus::Up {
        return Err(format!(
            "domain {}, READY: {ready:?}, others: {others:?}",
            domain.status.word()
        ));
    }
    if &ready != peers || !others.is_empty() {
        return Err(format!(
            "domain UP with READY {ready:?} and others {others:?}; the clique's daemons are {peers:?}"
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::imex::parse_domain;
    use serde_json::json;

    fn want(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn the_domain_is_ready_only_with_every_tray_ready_in_its_clique() {
        let cd = |status: &str, second: &str| {
            json!({"status": {"status": status, "nodes": [
                {"name": "w1", "ipAddress": "10.0.0.1", "cliqueID": "u.0", "index": 0, "status": "Ready"},
                {"name": "w2", "ipAddress": "10.0.0.2", "cliqueID": "u.0", "index": 1, "status": second},
            ]}})
        };
        let plan = want(&[("w1", "u.0"), ("w2", "u.0")]);
        let ready = cd("Ready", "Ready");
        assert_eq!(judge_cd("Ready", &cd_nodes(&ready), &plan), Ok(()));
        assert_eq!(cd_nodes(&ready)["w2"].ip, "10.0.0.2");
        let err = judge_cd("NotReady", &cd_nodes(&cd("NotReady", "NotReady")), &plan);
        assert!(err.expect_err("w2").contains("w2's daemon is \"NotReady\""));
        let err = judge_cd(
            "Ready",
            &cd_nodes(&ready),
            &want(&[("w1", "u.0"), ("w3", "u.0")]),
        );
        assert!(err.expect_err("w3").contains("the domain's trays are"));
        let err = judge_cd(
            "Ready",
            &cd_nodes(&ready),
            &want(&[("w1", "u.0"), ("w2", "u.1")]),
        );
        assert!(err
            .expect_err("clique")
            .contains("its tray is in Some(\"u.1\")"));
        let err = judge_cd("NotReady", &cd_nodes(&ready), &plan);
        assert!(err
            .expect_err("global")
            .contains("the domain's status is \"NotReady\""));
        assert!(cd_nodes(&json!({})).is_empty());
    }

    #[test]
    fn a_container_must_hold_exactly_its_claimed_channel() {
        let claim = json!({"status": {"allocation": {"devices": {"results": [
            {"request": "channel", "driver": "compute-domain.nvidia.com", "device": "channel-3"}]}}}});
        assert_eq!(claimed_channel(&claim), Some(3));
        assert_eq!(claimed_channel(&json!({})), None);
        let ls = "total 0\ncrw-rw-rw-    1 0        0         510,   3 Dec  5 23:00 channel3\n";
        let devices = listed_devices(ls).expect("parsed");
        assert_eq!(judge_channels(&devices, 3, 510), Ok(()));
        assert!(judge_channels(&devices, 0, 510).is_err(), "another channel");
        assert!(judge_channels(&devices, 3, 511).is_err(), "another major");
        let two = format!("{ls}crw-rw-rw- 1 0 0 510, 4 Dec  5 23:00 channel4\n");
        let err = judge_channels(&listed_devices(&two).expect("parsed"), 3, 510);
        assert!(err.expect_err("two").contains("channel4"));
        assert!(judge_channels(&[], 3, 510).is_err(), "none");
        let odd = listed_devices("-rw-r--r-- 1 0 0 12 Dec  5 23:00 notes\n");
        assert!(odd.expect_err("file").contains("not a character device"));
        let proc = "Character devices:\n  1 mem\n240 nvidia-caps-imex-channels\n241 nvidia-caps\n\nBlock devices:\n  7 loop\n";
        assert_eq!(channels_major(proc), Some(240));
        assert_eq!(channels_major("Character devices:\n  1 mem\n"), None);
    }

    #[test]
    fn the_hosts_file_must_name_exactly_the_cliques_daemons() {
        let hosts = "127.0.0.1 localhost\n10.0.0.1\tcompute-domain-daemon-0000\n\
                     10.0.0.2 compute-domain-daemon-0001 # peer\n10.0.0.9 other\n";
        let mapped = daemon_hosts(hosts);
        assert_eq!(mapped.len(), 2);
        let peers: BTreeSet<String> = ["10.0.0.1", "10.0.0.2"].map(str::to_owned).into();
        assert_eq!(judge_hosts(&mapped, &peers), Ok(()));
        let three: BTreeSet<String> = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
            .map(str::to_owned)
            .into();
        assert!(judge_hosts(&mapped, &three).is_err(), "a peer missing");
        let stranger = format!("{hosts}10.1.0.1 compute-domain-daemon-0002\n");
        assert!(
            judge_hosts(&daemon_hosts(&stranger), &peers).is_err(),
            "another rack's daemon"
        );
    }

    #[test]
    fn the_imex_domain_must_be_up_with_exactly_the_peers_ready() {
        let doc = |status: &str, second: &str| {
            format!(
                r#"{{"nodes":{{"0":{{"status":"READY","host":"10.0.0.1","version":"NO_GPU"}},
                "1":{{"status":"{second}","host":"10.0.0.2","version":"NO_GPU"}},
                "2":{{"status":"UNAVAILABLE","host":"","version":""}}}},"status":"{status}"}}"#
            )
        };
        let peers: BTreeSet<String> = ["10.0.0.1", "10.0.0.2"].map(str::to_owned).into();
        let up = parse_domain(&doc("UP", "READY")).expect("doc");
        assert_eq!(judge_domain(&up, &peers), Ok(()));
        let degraded = parse_domain(&doc("DEGRADED", "UNAVAILABLE")).expect("doc");
        let err = judge_domain(&degraded, &peers).expect_err("degraded");
        assert!(
            err.contains("domain DEGRADED") && err.contains("10.0.0.2 UNAVAILABLE"),
            "{err}"
        );
        let one: BTreeSet<String> = ["10.0.0.1"].map(str::to_owned).into();
        assert!(
            judge_domain(&up, &one).is_err(),
            "a stranger READY in the domain"
        );
    }
}
