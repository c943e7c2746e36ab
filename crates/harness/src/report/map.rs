//! The rack map: trays by rack (one NVLink domain each) and clique, each tray
//! with its scenario rows. Pure; the HTML page ([`super::html`]) and
//! `cargo xtask status`'s text lines ([`RackMap::text_lines`]) draw it.

use std::collections::BTreeMap;

use topology::Topology;

use super::{Report, ScenarioResult, Tray, Verdict, WorkerDetail};

/// Racks in order, each with its cliques in order.
#[derive(Debug, Clone, PartialEq)]
pub struct RackMap {
    /// The racks, by index.
    pub racks: Vec<Rack>,
}

/// One rack: one NVLink domain.
#[derive(Debug, Clone, PartialEq)]
pub struct Rack {
    /// The rack's index (0-based).
    pub index: u32,
    /// The cluster uuid of its domain.
    pub cluster_uuid: String,
    /// Its cliques, by id.
    pub cliques: Vec<CliqueGroup>,
}

/// One clique of a rack.
#[derive(Debug, Clone, PartialEq)]
pub struct CliqueGroup {
    /// The clique id.
    pub id: u32,
    /// Its trays, in worker order.
    pub trays: Vec<TrayCard>,
}

/// One tray and what each scenario showed on it.
#[derive(Debug, Clone, PartialEq)]
pub struct TrayCard {
    /// The node.
    pub node: String,
    /// Its GPUs, when known.
    pub gpus: Option<u32>,
    /// Whether it is in scenario 4's ComputeDomain.
    pub in_compute_domain: bool,
    /// One row per scenario result, in report order.
    pub rows: Vec<Row>,
}

/// One scenario result as one tray saw it.
#[derive(Debug, Clone, PartialEq)]
pub struct Row {
    /// The scenario result's name (`scenario1`, `scenario4-imex`, …).
    pub scenario: String,
    /// How it counts on this tray.
    pub verdict: Verdict,
    /// What was seen (a pass) or why (a failure or a skip).
    pub text: String,
    /// Whether the row is this tray's own checks or the whole scenario's outcome.
    pub scope: Scope,
}

/// Where a row's verdict comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// The tray's own per-worker details.
    Tray,
    /// The scenario's outcome: it recorded nothing for this tray.
    Scenario,
}

impl RackMap {
    /// The map of a report: its trays, their rows, the ComputeDomain's members.
    pub fn of(report: &Report) -> RackMap {
        let mut map = RackMap::of_trays(&report.trays);
        for card in map.cards_mut() {
            card.in_compute_domain = report.compute_domain.contains(&card.node);
            card.rows = report
                .scenarios
                .iter()
                .map(|result| row(result, &card.node))
                .collect();
        }
        map
    }

    /// The map of these trays, without rows.
    pub fn of_trays(trays: &[Tray]) -> RackMap {
        let mut racks: BTreeMap<u32, Rack> = BTreeMap::new();
        for tray in trays {
            let rack = racks.entry(tray.rack).or_insert_with(|| Rack {
                index: tray.rack,
                cluster_uuid: tray.cluster_uuid.clone(),
                cliques: Vec::new(),
            });
            let at = match rack.cliques.iter().position(|it| it.id == tray.clique) {
                Some(at) => at,
                None => {
                    rack.cliques.push(CliqueGroup {
                        id: tray.clique,
                        trays: Vec::new(),
                    });
                    rack.cliques.len() - 1
                }
            };
            rack.cliques[at].trays.push(TrayCard {
                node: tray.node.clone(),
                gpus: tray.gpus,
                in_compute_domain: false,
                rows: Vec::new(),
            });
        }
        let mut racks: Vec<Rack> = racks.into_values().collect();
        for rack in &mut racks {
            rack.cliques.sort_by_key(|it| it.id);
        }
        RackMap { racks }
    }

    fn cards_mut(&mut self) -> impl Iterator<Item = &mut TrayCard> {
        self.racks
            .iter_mut()
            .flat_map(|rack| rack.cliques.iter_mut())
            .flat_map(|clique| clique.trays.iter_mut())
    }

    /// One line per rack: `rack 0  domain …0000ab  clique 0: w1 w2 | clique 1: w3 w4`.
    pub fn text_lines(&self) -> Vec<String> {
        self.racks
            .iter()
            .map(|rack| {
                let cliques: Vec<String> = rack
                    .cliques
                    .iter()
                    .map(|clique| {
                        let nodes: Vec<&str> =
                            clique.trays.iter().map(|it| it.node.as_str()).collect();
                        format!("clique {}: {}", clique.id, nodes.join(" "))
                    })
                    .collect();
                format!(
                    "rack {}  domain {}  {}",
                    rack.index,
                    short_uuid(&rack.cluster_uuid),
                    cliques.join(" | ")
                )
            })
            .collect()
    }
}

/// The trays of `topology`: domain `r` is rack `r`, each clique's nodes its trays.
pub fn trays(topology: &Topology, gpus: Option<u32>) -> Vec<Tray> {
    let mut out = Vec::new();
    for (rack, domain) in (0u32..).zip(&topology.domains) {
        for clique in &domain.cliques {
            for node in &clique.nodes {
                out.push(Tray {
                    node: node.clone(),
                    rack,
                    clique: clique.id,
                    cluster_uuid: domain.uuid.to_string(),
                    gpus,
                });
            }
        }
    }
    out
}

/// A uuid's last six hex digits after an ellipsis (`…0000ab`): enough to tell racks apart.
pub fn short_uuid(uuid: &str) -> String {
    let hex: Vec<char> = uuid.chars().filter(char::is_ascii_hexdigit).collect();
    match hex.len() {
        0..=6 => uuid.to_owned(),
        len => format!("…{}", hex[len - 6..].iter().collect::<String>()),
    }
}

/// What `result` showed on `node`: its details there, or else its outcome.
fn row(result: &ScenarioResult, node: &str) -> Row {
    let mine: Vec<&WorkerDetail> = result.workers.iter().filter(|it| it.node == node).collect();
    if mine.is_empty() {
        let text = match (result.outcome.reason(), result.workers.is_empty()) {
            (Some(reason), _) => reason.to_owned(),
            (None, true) => String::new(),
            (None, false) => "nothing recorded for this tray".to_owned(),
        };
        return Row {
            scenario: result.name.clone(),
            verdict: result.outcome.verdict(),
            text,
            scope: Scope::Scenario,
        };
    }
    let failed: Vec<&str> = mine
        .iter()
        .filter(|it| !it.passed)
        .map(|it| it.detail.as_str())
        .collect();
    let (verdict, text) = if failed.is_empty() {
        let seen: Vec<&str> = mine.iter().map(|it| it.detail.as_str()).collect();
        (Verdict::Passed, seen.join("; "))
    } else {
        (Verdict::Failed, failed.join("; "))
    };
    Row {
        scenario: result.name.clone(),
        verdict,
        text,
        scope: Scope::Tray,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::Outcome;

    fn tray(node: &str, rack: u32, clique: u32) -> Tray {
        Tray {
            node: node.to_owned(),
            rack,
            clique,
            cluster_uuid: format!("00000000-0000-0000-0000-00000000{rack:02x}ab"),
            gpus: Some(4),
        }
    }

    fn detail(node: &str, detail: &str, passed: bool) -> WorkerDetail {
        WorkerDetail {
            node: node.to_owned(),
            pod: "p".to_owned(),
            detail: detail.to_owned(),
            passed,
        }
    }

    #[test]
    fn the_demo_layout_reads_back_from_its_topology_in_racks_and_cliques() {
        let workers: Vec<String> = ["w1", "w2", "w3", "w4", "w5", "w6"]
            .iter()
            .map(|it| it.to_string())
            .collect();
        let layout = topology::Layout::new(3, 2, Some(2)).expect("layout");
        let trays = trays(&layout.demo(&workers), Some(4));
        assert_eq!(trays.len(), 6);
        assert_eq!((trays[3].node.as_str(), trays[3].rack), ("w4", 1));
        let map = RackMap::of_trays(&trays);
        assert_eq!(
            map.text_lines(),
            [
                "rack 0  domain …0000ab  clique 0: w1 w2 | clique 1: w3",
                "rack 1  domain …0001ab  clique 0: w4 w5 | clique 1: w6",
            ]
        );
    }

    #[test]
    fn cliques_are_ordered_by_id_and_trays_keep_their_order() {
        let map = RackMap::of_trays(&[tray("b", 1, 1), tray("a", 1, 0), tray("c", 0, 1)]);
        assert_eq!(map.racks.len(), 2);
        assert_eq!(map.racks[0].index, 0);
        let ids: Vec<u32> = map.racks[1].cliques.iter().map(|it| it.id).collect();
        assert_eq!(ids, [0, 1]);
        assert!(RackMap::of_trays(&[]).text_lines().is_empty());
    }

    #[test]
    fn rows_take_the_trays_own_details_else_the_scenarios_outcome() {
        let report = Report {
            trays: vec![tray("w1", 0, 0), tray("w2", 0, 1)],
            compute_domain: vec!["w1".to_owned()],
            scenarios: vec![
                ScenarioResult {
                    workers: vec![
                        detail("w1", "clique 0 ok", true),
                        detail("w1", "imex cfg missing", false),
                        detail("", "ComputeDomainClique listed", true),
                    ],
                    ..ScenarioResult::new("scenario4", Outcome::Failed("w1 broke".into()), 1.0)
                },
                ScenarioResult::new("scenario2", Outcome::Skipped("no payload".into()), 0.0),
            ],
            ..Report::default()
        };
        let map = RackMap::of(&report);
        let w1 = &map.racks[0].cliques[0].trays[0];
        let w2 = &map.racks[0].cliques[1].trays[0];
        assert!(w1.in_compute_domain && !w2.in_compute_domain);
        assert_eq!(
            w1.rows[0],
            Row {
                scenario: "scenario4".into(),
                verdict: Verdict::Failed,
                text: "imex cfg missing".into(),
                scope: Scope::Tray,
            }
        );
        assert_eq!(
            (
                w2.rows[0].verdict,
                w2.rows[0].scope,
                w2.rows[0].text.as_str()
            ),
            (Verdict::Failed, Scope::Scenario, "w1 broke")
        );
        assert_eq!(
            (w2.rows[1].verdict, w2.rows[1].text.as_str()),
            (Verdict::Skipped, "no payload")
        );
        let mut passed = report.clone();
        passed.scenarios[0].outcome = Outcome::Passed;
        let w2 = &RackMap::of(&passed).racks[0].cliques[1].trays[0];
        assert_eq!(
            (w2.rows[0].verdict, w2.rows[0].text.as_str()),
            (Verdict::Passed, "nothing recorded for this tray")
        );
    }

    #[test]
    fn a_short_uuid_keeps_the_last_six_hex_digits() {
        assert_eq!(
            short_uuid("00000000-0000-0000-0000-0000000001ab"),
            "…0001ab"
        );
        assert_eq!(short_uuid("ab"), "ab");
    }
}
