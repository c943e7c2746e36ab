//! The double's daemons with a nodes file as NVIDIA's compute-domain daemon
//! writes it with `IMEXDaemonsWithDNSNames` (its default): host names, some of
//! which no daemon holds and which therefore do not resolve. The live members
//! come up and connect; the empty slots are listed, UNAVAILABLE, and do not
//! keep the domain from UP.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

const DAEMON: &str = env!("CARGO_BIN_EXE_nvidia-imex-double");
const CTL: &str = env!("CARGO_BIN_EXE_nvidia-imex-ctl-double");

/// Two loopback members, one of them by the name `localhost`.
const MEMBERS: [(&str, &str); 2] = [("localhost", "127.0.0.1"), ("127.0.0.41", "127.0.0.41")];
const EMPTY_SLOTS: [&str; 2] = [
    "compute-domain-daemon-0002.invalid",
    "compute-domain-daemon-0003.invalid",
];

struct Daemon(Child);

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

fn write_config(dir: &Path, ip: &str, nodes: &Path) -> String {
    let cfg = dir.join(format!("imexd-{ip}.cfg"));
    std::fs::write(
        &cfg,
        format!(
            "LOG_FILE_NAME=\nDAEMONIZE=0\nBIND_INTERFACE_IP={ip}\nSERVER_PORT=50140\n\
             IMEX_NODE_CONFIG_FILE={}\nIMEX_CMD_ENABLED=1\nIMEX_CMD_BIND_INTERFACE_IP={ip}\n\
             IMEX_CMD_PORT=50145\n",
            nodes.display()
        ),
    )
    .expect("config");
    cfg.display().to_string()
}

fn ctl(cfg: &str, args: &[&str]) -> String {
    let out = Command::new(CTL)
        .args(["-c", cfg])
        .args(args)
        .output()
        .expect("ctl");
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn empty_name_slots_wait_and_do_not_keep_the_domain_from_up() {
    let dir = tempfile::tempdir().expect("tempdir");
    let nodes = dir.path().join("nodes.cfg");
    let mut listing: Vec<&str> = MEMBERS.iter().map(|(entry, _)| *entry).collect();
    listing.extend(EMPTY_SLOTS);
    std::fs::write(&nodes, listing.join("\n") + "\n").expect("nodes");
    let mut daemons = Vec::new();
    let mut configs = Vec::new();
    for (_, ip) in MEMBERS {
        let root = dir.path().join(ip);
        std::fs::create_dir_all(root.join("var/run")).expect("root");
        let cfg = write_config(dir.path(), ip, &nodes);
        let child = Command::new(DAEMON)
            .args(["-c", &cfg, "--nogpu"])
            .env(imex_double::ROOT_ENV, &root)
            .env(imex_double::BACKOFF_ENV, "200")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("daemon");
        daemons.push(Daemon(child));
        configs.push(cfg);
    }
    let deadline = Instant::now() + Duration::from_secs(20);
    let doc = loop {
        let text = ctl(&configs[0], &["-N", "-j"]);
        if let Ok(doc) = serde_json::from_str::<serde_json::Value>(&text) {
            if doc["status"] == "UP" {
                break doc;
            }
        }
        assert!(
            Instant::now() < deadline,
            "the two live members never made the domain UP: {text}"
        );
        std::thread::sleep(Duration::from_millis(200));
    };
    for cfg in &configs {
        assert_eq!(ctl(cfg, &["-q"]), "READY\n");
    }
    let nodes = doc["nodes"].as_object().expect("nodes");
    assert_eq!(nodes.len(), 4, "every slot is listed: {doc}");
    for (idx, (_, ip)) in MEMBERS.iter().enumerate() {
        let node = &nodes[&idx.to_string()];
        assert_eq!(node["status"], "READY", "{doc}");
        assert_eq!(node["host"], *ip, "{doc}");
        let peer = (1 - idx).to_string();
        assert_eq!(node["connections"][&peer]["status"], "CONNECTED", "{doc}");
    }
    for idx in 2..4 {
        let node = &nodes[&idx.to_string()];
        assert_eq!(node["status"], "UNAVAILABLE", "{doc}");
        assert_eq!(node["host"], "", "{doc}");
    }
    // One live member gone: the domain is no longer UP.
    drop(daemons.pop());
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let text = ctl(&configs[0], &["-N", "-j"]);
        let doc: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
        if doc["status"] == "DEGRADED" {
            break;
        }
        assert!(Instant::now() < deadline, "never degraded: {text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}
