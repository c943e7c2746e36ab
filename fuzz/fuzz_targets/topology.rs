//! Topology parser and validator: arbitrary text never panics; anything
//! accepted validates, resolves each of its nodes to its own clique, and
//! round-trips through `to_yaml` (and through the Helm values fragment).

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(parsed) = topology::parse(text) else {
        return;
    };
    assert_eq!(parsed.validate(), Ok(()));
    for domain in &parsed.domains {
        for clique in &domain.cliques {
            for node in &clique.nodes {
                let identity = parsed.resolve(node).expect("a listed node resolves");
                assert_eq!(identity.cluster_uuid, domain.uuid);
                assert_eq!(identity.clique_id, clique.id);
            }
        }
    }
    let yaml = parsed.to_yaml();
    let again = topology::parse(&yaml)
        .unwrap_or_else(|err| panic!("to_yaml output does not re-parse: {err}\n{yaml}"));
    assert_eq!(again, parsed, "round trip changed the document:\n{yaml}");
    // The values fragment carries the same domains under `topology.domains`.
    let values = parsed.helm_values();
    let body: String = values
        .lines()
        .skip(2)
        .map(|line| format!("{}\n", line.strip_prefix("  ").unwrap_or(line)))
        .collect();
    let from_values = topology::parse(&format!("version: 1\n{body}"))
        .unwrap_or_else(|err| panic!("helm values do not re-parse: {err}\n{values}"));
    assert_eq!(from_values, parsed, "helm values changed the document:\n{values}");
});
