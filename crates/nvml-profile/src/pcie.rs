//! The node's PCIe topology: which NUMA node (and its CPUs), host bridge and PCIe switches each
//! GPU hangs off, and the `nvmlGpuTopologyLevel_t` two GPUs share.
//!
//! The YAML is a tree (`pcie_topology.numa_nodes[].host_bridges[]`, each bridge and switch with
//! `gpus` directly below it and nested `switches`); [`PcieTopology`] is its resolved form, one
//! path per GPU, from which every answer is computed.

use crate::seen::Seen;

use borsh::{BorshDeserialize, BorshSerialize};
use serde::{Deserialize, Serialize};

use crate::error::{invalid, Error, Result};

/// `pcie_topology`: the NUMA nodes of the machine.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PcieTopologyDoc {
    pub(crate) numa_nodes: Vec<NumaNodeDoc>,
}

/// One NUMA node: its id, its logical CPUs and the host bridges (root complexes) on it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct NumaNodeDoc {
    pub(crate) id: u32,
    /// Linux cpulist syntax: `0-71`, `0-55,112-167`.
    pub(crate) cpus: String,
    pub(crate) host_bridges: Vec<PortDoc>,
}

/// A host bridge or a PCIe switch: the GPUs (by `devices[].index`) directly below it, and the
/// switches below it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, BorshSerialize, BorshDeserialize)]
#[serde(deny_unknown_fields)]
pub(crate) struct PortDoc {
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) gpus: Vec<u32>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub(crate) switches: Vec<PortDoc>,
}

/// `nvmlGpuTopologyLevel_t`, nearest first (the derived order is NVML's numeric order).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum TopologyLevel {
    /// `NVML_TOPOLOGY_INTERNAL` (0): the same board (here: the same GPU).
    Internal,
    /// `NVML_TOPOLOGY_SINGLE` (10): both directly below one PCIe switch.
    Single,
    /// `NVML_TOPOLOGY_MULTIPLE` (20): below a common switch, through more than one switch.
    Multiple,
    /// `NVML_TOPOLOGY_HOSTBRIDGE` (30): the same host bridge, no common switch.
    HostBridge,
    /// `NVML_TOPOLOGY_NODE` (40): the same NUMA node, different host bridges.
    Node,
    /// `NVML_TOPOLOGY_SYSTEM` (50): different NUMA nodes.
    System,
}

impl TopologyLevel {
    /// Every level, nearest first.
    pub const ALL: [TopologyLevel; 6] = [
        TopologyLevel::Internal,
        TopologyLevel::Single,
        TopologyLevel::Multiple,
        TopologyLevel::HostBridge,
        TopologyLevel::Node,
        TopologyLevel::System,
    ];

    /// Its `nvmlGpuTopologyLevel_t` value.
    pub fn code(self) -> u32 {
        match self {
            TopologyLevel::Internal => 0,
            TopologyLevel::Single => 10,
            TopologyLevel::Multiple => 20,
            TopologyLevel::HostBridge => 30,
            TopologyLevel::Node => 40,
            TopologyLevel::System => 50,
        }
    }

    /// The level of an `nvmlGpuTopologyLevel_t` value; `None` for any other number.
    pub fn from_code(code: u32) -> Option<TopologyLevel> {
        TopologyLevel::ALL.into_iter().find(|it| it.code() == code)
    }
}

/// Where one GPU sits: its NUMA node, host bridge and switch chain (outermost first), as
/// positions in the document (a switch is named by its path, so equal prefixes are equal switches).
#[derive(Debug, Clone, PartialEq, Eq)]
struct Place {
    numa: usize,
    bridge: usize,
    switches: Vec<usize>,
}

/// A resolved PCIe topology over the visible GPUs (positions `0..count`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PcieTopology {
    /// `places[gpu]`.
    places: Vec<Place>,
    /// Per NUMA node: its id and its CPUs as inclusive ranges.
    numa_nodes: Vec<(u32, Vec<(u32, u32)>)>,
}

impl PcieTopology {
    /// The level two visible GPUs share; `None` if either is not visible.
    pub fn level(&self, a: usize, b: usize) -> Option<TopologyLevel> {
        let (pa, pb) = (self.places.get(a)?, self.places.get(b)?);
        Some(if a == b {
            TopologyLevel::Internal
        } else if pa.numa != pb.numa {
            TopologyLevel::System
        } else if pa.bridge != pb.bridge {
            TopologyLevel::Node
        } else {
            let common = pa
                .switches
                .iter()
                .zip(&pb.switches)
                .take_while(|(x, y)| x == y)
                .count();
            match common {
                0 => TopologyLevel::HostBridge,
                n if n == pa.switches.len() && n == pb.switches.len() => TopologyLevel::Single,
                _ => TopologyLevel::Multiple,
            }
        })
    }

    /// The other visible GPUs at `level` or nearer, in index order (`nvmlDeviceGetTopologyNearestGpus`);
    /// `None` if `gpu` is not visible.
    pub fn nearest(&self, gpu: usize, level: TopologyLevel) -> Option<Vec<usize>> {
        self.places.get(gpu)?;
        Some(
            (0..self.places.len())
                .filter(|&other| other != gpu)
                .filter(|&other| self.level(gpu, other).is_some_and(|l| l <= level))
                .collect(),
        )
    }

    /// The visible GPUs on the NUMA node that holds logical CPU `cpu`, in index order
    /// (`nvmlSystemGetTopologyGpuSet`); `None` if no NUMA node lists the CPU.
    pub fn gpus_of_cpu(&self, cpu: u32) -> Option<Vec<usize>> {
        let numa = self.numa_nodes.iter().position(|(_, ranges)| {
            ranges
                .iter()
                .any(|(first, last)| (*first..=*last).contains(&cpu))
        })?;
        Some(
            (0..self.places.len())
                .filter(|&gpu| self.places[gpu].numa == numa)
                .collect(),
        )
    }

    /// The logical CPUs of a visible GPU's NUMA node, as inclusive ranges (CPU affinity).
    pub fn cpus(&self, gpu: usize) -> Option<&[(u32, u32)]> {
        let place = self.places.get(gpu)?;
        Some(&self.numa_nodes[place.numa].1)
    }

    /// The NUMA node id of a visible GPU.
    pub fn numa_node(&self, gpu: usize) -> Option<u32> {
        let place = self.places.get(gpu)?;
        Some(self.numa_nodes[place.numa].0)
    }

    /// The topology over a subset of the GPUs, renumbered: GPU `n` of the result is GPU
    /// `gpus[n]` of this one (per-container visibility); positions past the count are skipped.
    pub fn restricted(&self, gpus: &[usize]) -> PcieTopology {
        PcieTopology {
            places: gpus
                .iter()
                .filter_map(|&gpu| self.places.get(gpu).cloned())
                .collect(),
            numa_nodes: self.numa_nodes.clone(),
        }
    }
}

/// Validates the document against `gpu_count` listed devices and resolves it for the first
/// `visible` of them.
pub(crate) fn resolve(
    doc: &PcieTopologyDoc,
    gpu_count: usize,
    visible: usize,
) -> Result<PcieTopology> {
    let mut found: Seen<u32, (String, Place)> = Seen::new();
    let mut numa_nodes = Vec::new();
    let mut bridges = 0;
    for (n, node) in doc.numa_nodes.iter().enumerate() {
        let at = format!("pcie_topology.numa_nodes[{n}]");
        if let Some((first, _)) = numa_nodes
            .iter()
            .enumerate()
            .find(|(_, (id, _))| *id == node.id)
        {
            return invalid(
                format!("{at}.id"),
                format!("{} is also pcie_topology.numa_nodes[{first}].id", node.id),
            );
        }
        let ranges = cpulist(&format!("{at}.cpus"), &node.cpus)?;
        overlap(&at, &ranges, &numa_nodes)?;
        numa_nodes.push((node.id, ranges));
        for (b, bridge) in node.host_bridges.iter().enumerate() {
            bridges += 1;
            let mut walk = Walk {
                gpu_count,
                found: &mut found,
            };
            let place = Place {
                numa: n,
                bridge: bridges,
                switches: Vec::new(),
            };
            walk.port(&format!("{at}.host_bridges[{b}]"), bridge, place)?;
        }
    }
    let mut places = Vec::with_capacity(visible);
    for gpu in 0..gpu_count as u32 {
        match found.remove(&gpu) {
            Some((_, place)) => places.push(place),
            None => {
                return invalid(
                    "pcie_topology",
                    format!(
                    "devices[{gpu}] is not placed: list its index under a host bridge or switch"
                ),
                )
            }
        }
    }
    places.truncate(visible);
    Ok(PcieTopology { places, numa_nodes })
}

/// The recursive walk over bridges and switches, collecting each GPU's place.
struct Walk<'a> {
    gpu_count: usize,
    found: &'a mut Seen<u32, (String, Place)>,
}

impl Walk<'_> {
    fn port(&mut self, at: &str, port: &PortDoc, place: Place) -> Result<()> {
        for (g, &gpu) in port.gpus.iter().enumerate() {
            let field = format!("{at}.gpus[{g}]");
            if gpu as usize >= self.gpu_count {
                return invalid(
                    field,
                    format!("is {gpu}, but there are only {} devices", self.gpu_count),
                );
            }
            if let Some((first, _)) = self.found.get(&gpu) {
                return invalid(field, format!("GPU {gpu} is also placed at {first}"));
            }
            self.found.insert(gpu, (field, place.clone()));
        }
        for (s, switch) in port.switches.iter().enumerate() {
            let mut below = place.clone();
            below.switches.push(s);
            self.port(&format!("{at}.switches[{s}]"), switch, below)?;
        }
        Ok(())
    }
}

/// Parses a Linux cpulist (`0-71`, `0-55,112-167`, `3`) into inclusive ranges.
fn cpulist(field: &str, text: &str) -> Result<Vec<(u32, u32)>> {
    let bad = || Error::Invalid {
        field: field.to_owned(),
        message: format!("{text:?} must be a cpulist such as 0-71 or 0-55,112-167"),
    };
    let mut ranges = Vec::new();
    for part in text.split(',') {
        let (first, last) = part
            .trim()
            .split_once('-')
            .unwrap_or((part.trim(), part.trim()));
        let first: u32 = first.trim().parse().map_err(|_| bad())?;
        let last: u32 = last.trim().parse().map_err(|_| bad())?;
        if first > last {
            return Err(bad());
        }
        ranges.push((first, last));
    }
    Ok(ranges)
}

/// INVALID when a range of this node shares a CPU with an earlier node.
fn overlap(at: &str, ranges: &[(u32, u32)], earlier: &[(u32, Vec<(u32, u32)>)]) -> Result<()> {
    for (id, theirs) in earlier {
        for &(a0, a1) in ranges {
            if let Some(&(b0, _)) = theirs.iter().find(|(b0, b1)| a0 <= *b1 && *b0 <= a1) {
                return invalid(
                    format!("{at}.cpus"),
                    format!("CPU {} is also on NUMA node {id}", a0.max(b0)),
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn levels_carry_nvml_s_codes() {
        let codes: Vec<u32> = TopologyLevel::ALL.iter().map(|it| it.code()).collect();
        assert_eq!(codes, [0, 10, 20, 30, 40, 50]);
        for level in TopologyLevel::ALL {
            assert_eq!(TopologyLevel::from_code(level.code()), Some(level));
        }
        assert_eq!(TopologyLevel::from_code(41), None);
    }
    use crate::{Profile, GB200, H100};
    use TopologyLevel::*;

    fn parse(yaml: &str, gpus: usize) -> Result<PcieTopology> {
        let doc: PcieTopologyDoc = serde_yaml::from_str(yaml).unwrap();
        resolve(&doc, gpus, gpus)
    }

    fn error(yaml: &str, gpus: usize) -> (String, String) {
        match parse(yaml, gpus) {
            Err(Error::Invalid { field, message }) => (field, message),
            other => panic!("expected a validation error, got {other:?}"),
        }
    }

    #[test]
    fn gb200_pairs_share_a_grace() {
        let topology = Profile::parse(GB200).unwrap().pcie_topology().unwrap();
        assert_eq!(topology.level(0, 0), Some(Internal));
        assert_eq!(topology.level(0, 1), Some(Node));
        assert_eq!(topology.level(2, 3), Some(Node));
        assert_eq!(topology.level(1, 2), Some(System));
        assert_eq!(topology.level(0, 4), None);
        assert_eq!(topology.gpus_of_cpu(0), Some(vec![0, 1]));
        assert_eq!(topology.gpus_of_cpu(143), Some(vec![2, 3]));
        assert_eq!(topology.gpus_of_cpu(144), None);
        assert_eq!(topology.numa_node(3), Some(1));
    }

    #[test]
    fn h100_pairs_share_a_switch() {
        let topology = Profile::parse(H100).unwrap().pcie_topology().unwrap();
        assert_eq!(topology.level(0, 1), Some(Single));
        assert_eq!(topology.level(6, 7), Some(Single));
        assert_eq!(topology.level(0, 3), Some(Node));
        assert_eq!(topology.level(3, 4), Some(System));
        assert_eq!(topology.nearest(0, Internal), Some(vec![]));
        assert_eq!(topology.nearest(0, Single), Some(vec![1]));
        assert_eq!(topology.nearest(0, HostBridge), Some(vec![1]));
        assert_eq!(topology.nearest(5, Node), Some(vec![4, 6, 7]));
        assert_eq!(topology.nearest(0, System), Some(vec![1, 2, 3, 4, 5, 6, 7]));
        assert_eq!(topology.nearest(8, System), None);
        assert_eq!(topology.gpus_of_cpu(112), Some(vec![0, 1, 2, 3]));
        assert_eq!(topology.gpus_of_cpu(60), Some(vec![4, 5, 6, 7]));
    }

    #[test]
    fn levels_follow_the_switch_tree() {
        let topology = parse(
            "numa_nodes:
  - id: 0
    cpus: 0-3
    host_bridges:
      - gpus: [0]
        switches:
          - gpus: [1, 2]
            switches: [{gpus: [3]}]
          - gpus: [4]",
            5,
        )
        .unwrap();
        assert_eq!(topology.level(1, 2), Some(Single));
        assert_eq!(topology.level(1, 3), Some(Multiple));
        assert_eq!(topology.level(3, 4), Some(HostBridge));
        assert_eq!(topology.level(0, 1), Some(HostBridge));
        assert_eq!(topology.nearest(1, Multiple), Some(vec![2, 3]));
    }

    #[test]
    fn hidden_gpus_are_not_answered() {
        let profile = Profile::parse(GB200).unwrap().with_num_devices(2).unwrap();
        let topology = profile.pcie_topology().unwrap();
        assert_eq!(topology.gpus_of_cpu(72), Some(vec![]));
        assert_eq!(topology.level(0, 2), None);
        assert_eq!(topology.nearest(0, System), Some(vec![1]));
    }

    #[test]
    fn a_restricted_topology_renumbers_the_chosen_gpus() {
        let topology = Profile::parse(H100).unwrap().pcie_topology().unwrap();
        // Host GPUs 1, 4 and 5 become 0, 1 and 2; 9 does not exist and is skipped.
        let visible = topology.restricted(&[1, 4, 5, 9]);
        assert_eq!(visible.level(0, 1), Some(System));
        assert_eq!(visible.level(1, 2), Some(Single));
        assert_eq!(visible.level(0, 3), None);
        assert_eq!(visible.nearest(1, Single), Some(vec![2]));
        assert_eq!(visible.gpus_of_cpu(112), Some(vec![0]));
        assert_eq!(visible.gpus_of_cpu(60), Some(vec![1, 2]));
        assert_eq!(visible.numa_node(1), topology.numa_node(4));
    }

    #[test]
    fn profiles_without_a_topology_have_none() {
        let mut doc = Profile::parse(H100).unwrap().doc;
        doc.pcie_topology = None;
        let text = serde_yaml::to_string(&doc).unwrap();
        assert_eq!(Profile::parse(&text).unwrap().pcie_topology(), None);
    }

    #[test]
    fn every_gpu_is_placed_once() {
        let one = "numa_nodes: [{id: 0, cpus: '0', host_bridges: [{gpus: [0]}]}]";
        assert_eq!(
            error(one, 2),
            (
                "pcie_topology".into(),
                "devices[1] is not placed: list its index under a host bridge or switch".into()
            )
        );
        let twice = "numa_nodes: [{id: 0, cpus: '0', host_bridges: [{gpus: [0], switches: [{gpus: [0]}]}]}]";
        assert_eq!(
            error(twice, 1),
            (
                "pcie_topology.numa_nodes[0].host_bridges[0].switches[0].gpus[0]".into(),
                "GPU 0 is also placed at pcie_topology.numa_nodes[0].host_bridges[0].gpus[0]"
                    .into()
            )
        );
        let unknown = "numa_nodes: [{id: 0, cpus: '0', host_bridges: [{gpus: [0, 5]}]}]";
        assert_eq!(
            error(unknown, 1).0,
            "pcie_topology.numa_nodes[0].host_bridges[0].gpus[1]"
        );
    }

    #[test]
    fn numa_nodes_are_distinct() {
        let same_id = "numa_nodes: [{id: 0, cpus: '0', host_bridges: []}, {id: 0, cpus: '1', host_bridges: []}]";
        assert_eq!(
            error(same_id, 0),
            (
                "pcie_topology.numa_nodes[1].id".into(),
                "0 is also pcie_topology.numa_nodes[0].id".into()
            )
        );
        let shared_cpu = "numa_nodes: [{id: 0, cpus: '0-7', host_bridges: []}, {id: 1, cpus: '8,4-5', host_bridges: []}]";
        assert_eq!(
            error(shared_cpu, 0),
            (
                "pcie_topology.numa_nodes[1].cpus".into(),
                "CPU 4 is also on NUMA node 0".into()
            )
        );
        for bad in ["''", "'7-3'", "'a'", "'1,'"] {
            let text = format!("numa_nodes: [{{id: 0, cpus: {bad}, host_bridges: []}}]");
            assert_eq!(
                error(&text, 0).0,
                "pcie_topology.numa_nodes[0].cpus",
                "{bad}"
            );
        }
    }

    #[test]
    fn cpulists_parse() {
        assert_eq!(
            cpulist("f", "0-55,112-167").unwrap(),
            vec![(0, 55), (112, 167)]
        );
        assert_eq!(cpulist("f", "3").unwrap(), vec![(3, 3)]);
    }

    #[test]
    fn levels_order_as_nvml_numbers_them() {
        let levels = [Internal, Single, Multiple, HostBridge, Node, System];
        assert!(levels.windows(2).all(|pair| pair[0] < pair[1]));
    }
}
