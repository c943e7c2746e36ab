//! Room for a kind cluster: the free disk under Docker's data root and the
//! available memory, against what each node costs, checked before anything
//! is created (`up`, `demo`) and reported by `doctor` as how many trays fit.
//!
//! The per-node figures were measured on this project's machine (2 cores,
//! 24 GiB, Docker 20.10, overlay2; BENCHMARKS.md "The cost of a tray"): a
//! node's `/var` volume (du of the volume after the demo's scenarios, the
//! DRA driver and both mock images loaded and run), its container's writable
//! layer, and its memory (`docker stats` after the demo). One tray is one
//! kind worker.
//!
//! [`room`] is pure; [`probe_host`] does the I/O (`docker info`, `df`,
//! `/proc/meminfo`) through the [`Runner`].

use crate::runner::{Cmd, Runner};

const MB: u64 = 1_000_000;

/// What one node takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct NodeCost {
    /// Disk under Docker's data root (volume and writable layer), bytes.
    pub disk: u64,
    /// Memory, bytes.
    pub memory: u64,
}

/// The cost of the control plane and of each worker, for one kind of node image.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Costs {
    /// Which nodes these are, for messages.
    pub what: &'static str,
    /// The control plane.
    pub control_plane: NodeCost,
    /// Each worker (tray).
    pub worker: NodeCost,
}

/// The offline pair (`--offline`): workers without the control-plane images,
/// the preloaded images stored gzipped. Measured 2026-12-04 on a 4-tray
/// `demo --offline` after scenarios 1, 3 and 4 (the mock, workload and DRA
/// driver images loaded and run on every worker): a worker's `/var` 809 to
/// 811 MB, the control plane's 1,401 MB (idle after creation: 389 and 993
/// MB); memory at most 464 MiB per worker and 1.02 GiB on the control plane
/// over the demo runs.
pub const LEAN: Costs = Costs {
    what: "offline nodes, lean workers",
    control_plane: NodeCost {
        disk: 1_550 * MB,
        memory: 1_200 * MB,
    },
    worker: NodeCost {
        disk: 850 * MB,
        memory: 500 * MB,
    },
};

/// One image on every node: the online `kindest/node` or `--node-image`.
/// Measured with the full offline image before the lean change on every node
/// (it also stands in for the pinned `kindest/node`, which likewise preloads
/// every control-plane image): idle a worker's `/var` held 1,196 MB and the
/// control plane's 1,713 MB at 4 and 8 trays; the demo adds what it adds to a
/// lean node (422 MB per worker, 482 MB on the control plane).
pub const FULL: Costs = Costs {
    what: "one node image on every node, the control-plane images on every worker",
    control_plane: NodeCost {
        disk: 2_200 * MB,
        memory: 1_200 * MB,
    },
    worker: NodeCost {
        disk: 1_650 * MB,
        memory: 500 * MB,
    },
};

/// Disk kept free beyond the nodes: image archives, scratch files, logs, and
/// Docker's own headroom.
pub const DISK_RESERVE: u64 = 2_000 * MB;
/// Memory kept for the host, Docker and xtask itself.
pub const MEMORY_RESERVE: u64 = 2_000 * MB;

/// The costs of a run's nodes, known before any image is built or looked
/// up: the offline pair (`--offline` without `--node-image`) is lean, any
/// other path runs one image on every node.
pub fn costs_of_run(offline: bool, node_image: Option<&str>) -> &'static Costs {
    match (offline, node_image) {
        (true, None) => &LEAN,
        _ => &FULL,
    }
}

/// What the host offers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Host {
    /// Free bytes on the filesystem of Docker's data root.
    pub free_disk: u64,
    /// `MemAvailable`, bytes.
    pub available_memory: u64,
}

/// What binds first.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Binding {
    /// Free disk under Docker's data root.
    Disk,
    /// Available memory.
    Memory,
}

/// The verdict for a cluster of one control plane and `trays` workers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Room {
    /// The trays asked for.
    pub trays: usize,
    /// Disk the cluster needs, reserve included.
    pub need_disk: u64,
    /// Memory the cluster needs, reserve included.
    pub need_memory: u64,
    /// The most trays that fit.
    pub max_trays: usize,
    /// What limits `max_trays`.
    pub binds: Binding,
    /// The host, as offered (with a replaced cluster's nodes counted free).
    pub host: Host,
    /// The costs used.
    pub costs: Costs,
}

/// Room for one control plane and `trays` workers on `host`; `reclaimed`
/// nodes of a cluster about to be deleted (`--force-recreate`) count as free.
pub fn room(host: Host, costs: &Costs, trays: usize, reclaimed: usize) -> Room {
    let reclaimed = reclaimed as u64;
    let host = Host {
        free_disk: host.free_disk + reclaimed * costs.worker.disk,
        available_memory: host.available_memory + reclaimed * costs.worker.memory,
    };
    let fixed_disk = DISK_RESERVE + costs.control_plane.disk;
    let fixed_memory = MEMORY_RESERVE + costs.control_plane.memory;
    let by_disk = host.free_disk.saturating_sub(fixed_disk) / costs.worker.disk;
    let by_memory = host.available_memory.saturating_sub(fixed_memory) / costs.worker.memory;
    let (max, binds) = if by_disk <= by_memory {
        (by_disk, Binding::Disk)
    } else {
        (by_memory, Binding::Memory)
    };
    Room {
        trays,
        need_disk: fixed_disk + trays as u64 * costs.worker.disk,
        need_memory: fixed_memory + trays as u64 * costs.worker.memory,
        max_trays: usize::try_from(max).unwrap_or(usize::MAX),
        binds,
        host,
        costs: *costs,
    }
}

fn gb(bytes: u64) -> String {
    format!("{:.1} GB", bytes as f64 / 1e9)
}

impl Room {
    /// Whether the trays asked for fit.
    pub fn fits(&self) -> bool {
        self.trays <= self.max_trays
    }

    /// One line: what is needed, what is there, how many trays fit.
    pub fn summary(&self) -> String {
        let binds = match self.binds {
            Binding::Disk => "disk",
            Binding::Memory => "memory",
        };
        format!(
            "{} trays + control plane ({}) need {} of disk and {} of memory; {} free under Docker's data root, \
             {} available: at most {} trays fit ({binds} binds first)",
            self.trays,
            self.costs.what,
            gb(self.need_disk),
            gb(self.need_memory),
            gb(self.host.free_disk),
            gb(self.host.available_memory),
            self.max_trays,
        )
    }

    /// The refusal of `up`/`demo` when the trays do not fit.
    pub fn refusal(&self) -> String {
        format!(
            "not enough room for this cluster: {}. Free some disk (`docker system df`), ask for fewer trays, \
             use the offline lean nodes (--offline) if you are not already, or pass --no-room-check to try anyway \
             (kind then fails when the disk fills, at the node that does not fit)",
            self.summary()
        )
    }
}

/// `df -B1 --output=avail DIR`: the bytes free.
pub fn parse_df_avail(text: &str) -> Option<u64> {
    text.lines().nth(1)?.trim().parse().ok()
}

/// `MemAvailable` of `/proc/meminfo`, in bytes.
pub fn parse_mem_available(text: &str) -> Option<u64> {
    let line = text.lines().find(|it| it.starts_with("MemAvailable:"))?;
    let kib: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kib * 1024)
}

/// The host's free disk under Docker's data root (`docker info`, then `df` of
/// that directory) and its available memory.
pub fn probe_host<R: Runner>(runner: &R) -> anyhow::Result<Host> {
    let root = runner
        .check(&Cmd::new(
            "docker",
            &["info", "--format", "{{.DockerRootDir}}"],
        ))?
        .stdout
        .trim()
        .to_owned();
    let df = runner.check(&Cmd::new("df", &["-B1", "--output=avail", &root]))?;
    let free_disk = parse_df_avail(&df.stdout).ok_or_else(|| {
        anyhow::format_err!(
            "cannot read the free space of Docker's data root {root} from `df`: {}",
            df.stdout.trim()
        )
    })?;
    let meminfo = std::fs::read_to_string("/proc/meminfo")
        .map_err(|err| anyhow::format_err!("reading /proc/meminfo: {err}"))?;
    let available_memory = parse_mem_available(&meminfo)
        .ok_or_else(|| anyhow::format_err!("/proc/meminfo has no MemAvailable line"))?;
    Ok(Host {
        free_disk,
        available_memory,
    })
}

/// What [`check`] found.
#[derive(Debug)]
pub enum Checked {
    /// The cluster exists and is not recreated: nothing is created.
    Reused,
    /// The host could not be probed (said, not refused).
    Unknown(String),
    /// The cluster's nodes fit.
    Fits(Room),
}

/// The room check of `up` and `demo` for `cluster` with `costs`, before
/// anything is built or created: fails with [`Room::refusal`] when the
/// nodes do not fit; a cluster that will be reused is not checked, and one
/// about to be recreated counts as free.
pub fn check<R: Runner>(
    runner: &R,
    cluster: &crate::names::KindCluster,
    costs: &Costs,
    force_recreate: bool,
) -> anyhow::Result<Checked> {
    let present = crate::cluster::exists(runner, cluster)?;
    if present && !force_recreate {
        return Ok(Checked::Reused);
    }
    let host = match probe_host(runner) {
        Ok(host) => host,
        Err(err) => return Ok(Checked::Unknown(format!("{err:#}"))),
    };
    let reclaimed = if present { cluster.nodes().len() } else { 0 };
    let room = room(host, costs, cluster.workers().len(), reclaimed);
    if !room.fits() {
        anyhow::bail!("{}", room.refusal());
    }
    Ok(Checked::Fits(room))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runner::Output;
    use std::cell::RefCell;
    use test_support::assert_contains;

    /// A runner that answers each command by a prefix of its command line, in order.
    #[derive(Default)]
    struct Scripted(RefCell<Vec<(&'static str, &'static str)>>);

    impl Scripted {
        fn expect(&self, prefix: &'static str, stdout: &'static str) -> &Scripted {
            self.0.borrow_mut().push((prefix, stdout));
            self
        }
    }

    impl Runner for Scripted {
        fn run(&self, cmd: &Cmd) -> anyhow::Result<Output> {
            let line = cmd.display();
            let (prefix, stdout) = self.0.borrow_mut().remove(0);
            anyhow::ensure!(line.starts_with(prefix), "unexpected `{line}`");
            Ok(Output {
                ok: true,
                stdout: stdout.to_owned(),
                stderr: String::new(),
            })
        }
    }

    /// This project's machine: about 45 GB free, 22 GiB available.
    fn machine() -> Host {
        Host {
            free_disk: 45_000 * MB,
            available_memory: 22 * 1024 * 1024 * 1024,
        }
    }

    #[test]
    fn two_racks_fit_here_on_lean_nodes_but_not_with_the_control_plane_images_on_every_worker() {
        let lean = room(machine(), &LEAN, 36, 0);
        assert!(lean.fits(), "{}", lean.summary());
        assert_eq!(
            lean.binds,
            Binding::Memory,
            "disk: (45000 - 2000 - 1550) / 850 = 48"
        );
        assert_eq!(lean.need_disk, 2_000 * MB + 1_550 * MB + 36 * 850 * MB);
        assert_eq!(lean.max_trays, 40, "(23622 - 2000 - 1200) / 500");
        let full = room(machine(), &FULL, 36, 0);
        assert!(!full.fits(), "{}", full.summary());
        assert_eq!(full.max_trays, 24);
        assert_contains(&full.refusal(), "at most 24 trays fit (disk binds first)");
        assert_contains(&full.refusal(), "--no-room-check");
    }

    #[test]
    fn memory_binds_when_it_is_short_and_a_replaced_cluster_counts_as_free() {
        let host = Host {
            free_disk: 500_000 * MB,
            available_memory: 5_000 * MB,
        };
        let it = room(host, &LEAN, 18, 0);
        assert_eq!(it.binds, Binding::Memory);
        assert_eq!(it.max_trays, 3, "(5000 - 2000 - 1200) / 500");
        assert!(!it.fits());
        let replaced = room(host, &LEAN, 18, 4);
        assert_eq!(replaced.max_trays, 7, "its 4 workers' memory comes back");
        let none = room(
            Host {
                free_disk: 0,
                available_memory: 0,
            },
            &LEAN,
            0,
            0,
        );
        assert_eq!(none.max_trays, 0);
        assert!(none.fits(), "zero trays always fit");
    }

    #[test]
    fn the_offline_pair_is_costed_lean_and_one_image_full() {
        const { assert!(LEAN.worker.disk < FULL.worker.disk) };
        assert_eq!(costs_of_run(true, None), &LEAN);
        assert_eq!(costs_of_run(false, None), &FULL);
        assert_eq!(costs_of_run(false, Some("kindest/node:v1.34.3")), &FULL);
    }

    #[test]
    fn df_and_meminfo_are_read() {
        assert_eq!(
            parse_df_avail("    Avail\n41408774144\n"),
            Some(41_408_774_144)
        );
        assert_eq!(parse_df_avail("Avail\n"), None);
        let meminfo = "MemTotal:       24683428 kB\nMemFree:        12000000 kB\nMemAvailable:   23440000 kB\n";
        assert_eq!(parse_mem_available(meminfo), Some(23_440_000 * 1024));
        assert_eq!(parse_mem_available("MemTotal: 1 kB\n"), None);
    }

    fn cluster() -> crate::names::KindCluster {
        crate::names::KindCluster::new("lean-x", 4).expect("valid")
    }

    #[test]
    fn a_reused_cluster_is_not_checked_and_a_new_one_is_refused_when_it_does_not_fit() {
        let fake = Scripted::default();
        fake.expect("kind get clusters", "other\nlean-x\n");
        assert!(matches!(
            check(&fake, &cluster(), &LEAN, false).expect("reused"),
            Checked::Reused
        ));
        let fake = Scripted::default();
        fake.expect("kind get clusters", "other\n")
            .expect("docker info", "/var/lib/docker\n")
            .expect("df", "Avail\n3500000000\n");
        let err = check(&fake, &cluster(), &LEAN, false)
            .expect_err("3.5 GB cannot hold 4 trays")
            .to_string();
        assert_contains(&err, "not enough room for this cluster: 4 trays");
        assert_contains(&err, "at most 0 trays fit (disk binds first)");
        let fake = Scripted::default();
        fake.expect("kind get clusters", "other\n")
            .expect("docker info", "/var/lib/docker\n")
            .expect("df", "Avail\n45000000000\n");
        let Checked::Fits(room) = check(&fake, &cluster(), &LEAN, false).expect("fits") else {
            panic!("45 GB hold 4 trays");
        };
        assert_eq!(room.trays, 4);
        assert!(room.max_trays >= 4, "{}", room.summary());
    }

    #[test]
    fn a_recreated_cluster_counts_as_free_and_an_unreadable_host_is_said_not_refused() {
        let fake = Scripted::default();
        fake.expect("kind get clusters", "lean-x\n")
            .expect("docker info", "/var/lib/docker\n")
            .expect("df", "Avail\n8000000000\n");
        let Checked::Fits(room) = check(&fake, &cluster(), &LEAN, true).expect("fits") else {
            panic!("its own 5 nodes come back");
        };
        assert_eq!(room.host.free_disk, 8_000 * MB + 5 * LEAN.worker.disk);
        let fake = Scripted::default();
        fake.expect("kind get clusters", "\n")
            .expect("docker info", "/d\n")
            .expect("df", "no number");
        assert!(matches!(
            check(&fake, &cluster(), &LEAN, false).expect("going on"),
            Checked::Unknown(_)
        ));
    }

    #[test]
    fn the_host_is_probed_under_dockers_data_root() {
        let fake = Scripted::default();
        fake.expect("docker info --format", "/srv/docker\n")
            .expect("df -B1 --output=avail /srv/docker", "Avail\n123000000\n");
        let host = probe_host(&fake).expect("probed");
        assert_eq!(host.free_disk, 123_000_000);
        assert!(host.available_memory > 0);
        let fake = Scripted::default();
        fake.expect("docker info --format", "/x\n")
            .expect("df", "garbage");
        let err = probe_host(&fake).expect_err("unreadable").to_string();
        assert_contains(&err, "Docker's data root /x");
    }
}
