//! The shape of a simulated cluster: racks of compute trays, each rack one
//! NVLink domain split into cliques, and the topologies derived from it.
//!
//! Workers are taken in order: rack 0's trays first, then rack 1's, and so
//! on; inside a rack the trays are split into contiguous cliques, the larger
//! ones first when the split is uneven. Rack `r`'s domain uuid is the demo
//! uuid with `r` in bytes 13–14 (`…0000ab`, `…0001ab`, …), its rebind
//! domain's the rebind uuid likewise (`…0000ff`, `…0001ff`, …), so rack 0 of
//! the default layout is exactly the demo topology.

use std::fmt;

use crate::generate::{DEMO_UUID, REBIND_CLIQUE, REBIND_UUID};
use crate::{Clique, ClusterUuid, Domain, Topology};

/// Compute trays per rack at most: a GB200 NVL72 rack holds 18.
pub const MAX_TRAYS: u32 = 18;
/// Racks at most (8 full racks are 144 kind nodes, far past one machine).
pub const MAX_RACKS: u32 = 8;

/// Racks × trays, each rack split into cliques. Valid by construction.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Layout {
    trays: u32,
    racks: u32,
    cliques_per_rack: u32,
}

/// Why a layout was refused; the message says what to pass instead.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LayoutError {
    /// `--trays` out of 1..=18.
    #[error("--trays {0}: a rack holds 1 to {MAX_TRAYS} compute trays (a GB200 NVL72 rack has 18); pass --trays 1..{MAX_TRAYS}")]
    Trays(u32),
    /// `--racks` out of 1..=8.
    #[error("--racks {0}: pass 1 to {MAX_RACKS} racks")]
    Racks(u32),
    /// `--cliques-per-rack` out of 1..=trays.
    #[error("--cliques-per-rack {cliques}: a rack of {trays} trays splits into 1 to {trays} cliques; pass --cliques-per-rack 1..{trays} (or more --trays)")]
    Cliques {
        /// The cliques asked for.
        cliques: u32,
        /// The trays per rack.
        trays: u32,
    },
}

/// Where one worker sits: its rack and its clique in that rack.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Place {
    /// The rack (0-based), also its domain's index.
    pub rack: u32,
    /// The clique id inside the rack's domain.
    pub clique: u32,
}

impl Default for Layout {
    /// Today's demo: 4 trays, 1 rack, 2 cliques of 2.
    fn default() -> Layout {
        Layout {
            trays: 4,
            racks: 1,
            cliques_per_rack: 2,
        }
    }
}

impl fmt::Display for Layout {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} rack(s) × {} trays, {} clique(s) per rack",
            self.racks, self.trays, self.cliques_per_rack
        )
    }
}

impl Layout {
    /// A layout; `cliques_per_rack` `None` is 2 (today's demo), or 1 for a
    /// rack of a single tray.
    pub fn new(
        trays: u32,
        racks: u32,
        cliques_per_rack: Option<u32>,
    ) -> Result<Layout, LayoutError> {
        if !(1..=MAX_TRAYS).contains(&trays) {
            return Err(LayoutError::Trays(trays));
        }
        if !(1..=MAX_RACKS).contains(&racks) {
            return Err(LayoutError::Racks(racks));
        }
        let cliques = cliques_per_rack.unwrap_or(trays.min(2));
        if !(1..=trays).contains(&cliques) {
            return Err(LayoutError::Cliques { cliques, trays });
        }
        Ok(Layout {
            trays,
            racks,
            cliques_per_rack: cliques,
        })
    }

    /// Trays per rack.
    pub fn trays(&self) -> u32 {
        self.trays
    }

    /// Racks.
    pub fn racks(&self) -> u32 {
        self.racks
    }

    /// Cliques per rack.
    pub fn cliques_per_rack(&self) -> u32 {
        self.cliques_per_rack
    }

    /// Workers in all: trays × racks.
    pub fn workers(&self) -> usize {
        (self.trays * self.racks) as usize
    }

    /// Where the worker at `index` (0-based, in worker order) sits.
    pub fn place(&self, index: usize) -> Place {
        let index = u32::try_from(index).unwrap_or(u32::MAX);
        let (rack, tray) = (index / self.trays, index % self.trays);
        // The first `rem` cliques hold one tray more than the others.
        let (size, rem) = (
            self.trays / self.cliques_per_rack,
            self.trays % self.cliques_per_rack,
        );
        let big = rem * (size + 1);
        let clique = if tray < big {
            tray / (size + 1)
        } else {
            rem + (tray - big) / size
        };
        Place { rack, clique }
    }

    /// The layout whose [`place`](Self::place)s are `places` (in worker order), if any.
    ///
    /// This is how a running cluster's layout is read back from its nodes' labels.
    pub fn from_places(places: &[Place]) -> Option<Layout> {
        let racks = places.iter().map(|it| it.rack).max()? + 1;
        let trays = u32::try_from(places.len()).ok()? / racks;
        let cliques = places.iter().map(|it| it.clique).max()? + 1;
        let layout = Layout::new(trays, racks, Some(cliques)).ok()?;
        let matches = layout.workers() == places.len()
            && places
                .iter()
                .enumerate()
                .all(|(index, place)| layout.place(index) == *place);
        matches.then_some(layout)
    }

    /// The scenario-1 topology: one domain per rack, its trays in cliques.
    ///
    /// `workers` are in worker order (kind's `-worker`, `-worker2`, …); the
    /// default layout over 4 workers is exactly [`crate::demo`]'s document.
    pub fn demo(&self, workers: &[String]) -> Topology {
        self.topology(
            workers,
            |rack| domain_name("demo-domain", rack),
            |rack| (rack_uuid(DEMO_UUID, rack), None),
        )
    }

    /// The scenario-3 topology: every rack's trays in one clique 99 of the
    /// rack's own rebind domain (rack 0: `rebinder`, uuid …00ff).
    pub fn rebind(&self, workers: &[String]) -> Topology {
        self.topology(
            workers,
            |rack| domain_name("rebinder", rack),
            |rack| (rack_uuid(REBIND_UUID, rack), Some(REBIND_CLIQUE)),
        )
    }

    fn topology(
        &self,
        workers: &[String],
        name: impl Fn(u32) -> String,
        identity: impl Fn(u32) -> (ClusterUuid, Option<u32>),
    ) -> Topology {
        let mut domains: Vec<Domain> = (0..self.racks)
            .map(|rack| {
                let (uuid, single) = identity(rack);
                let cliques = match single {
                    Some(id) => vec![Clique {
                        id,
                        nodes: Vec::new(),
                    }],
                    None => (0..self.cliques_per_rack)
                        .map(|id| Clique {
                            id,
                            nodes: Vec::new(),
                        })
                        .collect(),
                };
                Domain {
                    name: name(rack),
                    uuid,
                    cliques,
                }
            })
            .collect();
        for (index, worker) in workers.iter().enumerate().take(self.workers()) {
            let place = self.place(index);
            let domain = &mut domains[place.rack as usize];
            let at = if domain.cliques.len() == 1 {
                0
            } else {
                place.clique as usize
            };
            domain.cliques[at].nodes.push(worker.clone());
        }
        Topology {
            version: 1,
            domains,
        }
    }
}

/// Rack `rack`'s domain name: `base` for rack 0, `base-rack<r>` after.
fn domain_name(base: &str, rack: u32) -> String {
    match rack {
        0 => base.to_owned(),
        _ => format!("{base}-rack{rack}"),
    }
}

/// `base` with `rack` in bytes 13–14 (big-endian), so rack 0 is `base` itself.
pub fn rack_uuid(base: ClusterUuid, rack: u32) -> ClusterUuid {
    let mut bytes = *base.as_bytes();
    let [_, _, high, low] = rack.to_be_bytes();
    bytes[13] = high;
    bytes[14] = low;
    ClusterUuid::from_bytes(bytes)
}

#[cfg(test)]
#[path = "layout_tests.rs"]
mod tests;
