use super::*;
use crate::{demo, kind_workers, rebind};

const CLUSTER: &str = "nvml-mock-compute-domain";

fn layout(trays: u32, racks: u32, cliques: Option<u32>) -> Layout {
    Layout::new(trays, racks, cliques).unwrap_or_else(|err| panic!("{err}"))
}

fn cliques_of(topology: &Topology) -> Vec<(String, u32, Vec<String>)> {
    topology
        .domains
        .iter()
        .flat_map(|domain| {
            domain
                .cliques
                .iter()
                .map(|clique| (domain.uuid.to_string(), clique.id, clique.nodes.clone()))
        })
        .collect()
}

#[test]
fn the_default_layout_is_todays_demo_and_rebind_topology() {
    let workers = kind_workers(CLUSTER, 4);
    let default = Layout::default();
    assert_eq!(default, layout(4, 1, None));
    assert_eq!(default.workers(), 4);
    assert_eq!(default.demo(&workers), demo(&workers));
    assert_eq!(default.rebind(&workers), rebind(&workers));
}

#[test]
fn flags_out_of_range_are_refused_saying_what_to_pass() {
    for (trays, racks, cliques, want) in [
        (0, 1, None, "--trays 0: a rack holds 1 to 18 compute trays"),
        (19, 1, None, "pass --trays 1..18"),
        (4, 0, None, "--racks 0: pass 1 to 8 racks"),
        (4, 9, None, "--racks 9"),
        (
            4,
            1,
            Some(0),
            "--cliques-per-rack 0: a rack of 4 trays splits into 1 to 4 cliques",
        ),
        (
            4,
            1,
            Some(5),
            "pass --cliques-per-rack 1..4 (or more --trays)",
        ),
    ] {
        let err = Layout::new(trays, racks, cliques)
            .expect_err(want)
            .to_string();
        assert!(err.contains(want), "{err}");
    }
    assert_eq!(
        layout(1, 1, None).cliques_per_rack(),
        1,
        "one tray, one clique"
    );
    assert_eq!(layout(18, 8, Some(18)).workers(), 144);
}

#[test]
fn each_rack_is_its_own_domain_with_a_derived_uuid() {
    let two = layout(2, 2, None);
    let workers = kind_workers("s", two.workers());
    let topology = two.demo(&workers);
    topology.validate().expect("valid");
    assert_eq!(
        cliques_of(&topology),
        [
            (
                "00000000-0000-0000-0000-0000000000ab".to_owned(),
                0,
                vec!["s-worker".to_owned()]
            ),
            (
                "00000000-0000-0000-0000-0000000000ab".to_owned(),
                1,
                vec!["s-worker2".to_owned()]
            ),
            (
                "00000000-0000-0000-0000-0000000001ab".to_owned(),
                0,
                vec!["s-worker3".to_owned()]
            ),
            (
                "00000000-0000-0000-0000-0000000001ab".to_owned(),
                1,
                vec!["s-worker4".to_owned()]
            ),
        ]
    );
    assert_eq!(topology.domains[0].name, "demo-domain");
    assert_eq!(topology.domains[1].name, "demo-domain-rack1");
    let rebind = two.rebind(&workers);
    rebind.validate().expect("valid");
    assert_eq!(
        cliques_of(&rebind),
        [
            (
                "00000000-0000-0000-0000-0000000000ff".to_owned(),
                99,
                workers[..2].to_vec()
            ),
            (
                "00000000-0000-0000-0000-0000000001ff".to_owned(),
                99,
                workers[2..].to_vec()
            ),
        ]
    );
    assert_eq!(
        rack_uuid(DEMO_UUID, 0x0102).to_string(),
        "00000000-0000-0000-0000-0000000102ab"
    );
}

#[test]
fn a_rack_splits_into_balanced_contiguous_cliques_larger_first() {
    let sizes = |trays: u32, cliques: u32| -> Vec<usize> {
        let it = layout(trays, 1, Some(cliques));
        let topology = it.demo(&kind_workers("c", it.workers()));
        topology.domains[0]
            .cliques
            .iter()
            .map(|c| c.nodes.len())
            .collect()
    };
    assert_eq!(sizes(18, 1), [18]);
    assert_eq!(sizes(18, 2), [9, 9]);
    assert_eq!(sizes(18, 4), [5, 5, 4, 4]);
    assert_eq!(sizes(7, 3), [3, 2, 2]);
    assert_eq!(sizes(3, 3), [1, 1, 1]);
    let full = layout(18, 2, Some(1));
    let places: Vec<Place> = (0..full.workers()).map(|at| full.place(at)).collect();
    assert!(places[..18]
        .iter()
        .all(|it| *it == Place { rack: 0, clique: 0 }));
    assert!(places[18..]
        .iter()
        .all(|it| *it == Place { rack: 1, clique: 0 }));
}

#[test]
fn a_layout_is_read_back_from_its_places_and_nothing_else() {
    for it in [
        Layout::default(),
        layout(18, 1, Some(1)),
        layout(18, 2, Some(3)),
        layout(2, 2, None),
        layout(1, 3, None),
    ] {
        let places: Vec<Place> = (0..it.workers()).map(|at| it.place(at)).collect();
        assert_eq!(Layout::from_places(&places), Some(it), "{it}");
    }
    let place = |rack, clique| Place { rack, clique };
    assert_eq!(Layout::from_places(&[]), None);
    // Uneven racks, cliques out of order.
    assert_eq!(
        Layout::from_places(&[place(0, 0), place(0, 0), place(1, 0)]),
        None
    );
    assert_eq!(Layout::from_places(&[place(0, 1), place(0, 0)]), None);
}
