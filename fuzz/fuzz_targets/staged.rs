//! The staged decoders the mock library runs at init (`nvml_profile::staged::decode`,
//! `topology::staged::decode`): arbitrary bytes never panic; anything accepted is valid (its
//! devices resolve, its nodes resolve) and encodes back to the same bytes (the form is
//! canonical). Seed it with real encodings: `nvml-mock-stager compile-profile` /
//! `compile-topology` write them.

#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(profile) = nvml_profile::staged::decode(data) {
        assert_eq!(profile.devices().len(), profile.device_count());
        let _ = profile.pcie_topology();
        assert_eq!(nvml_profile::staged::encode(&profile), data, "not canonical");
    }
    if let Ok(topology) = topology::staged::decode(data) {
        assert_eq!(topology.validate(), Ok(()));
        for domain in &topology.domains {
            for clique in &domain.cliques {
                for node in &clique.nodes {
                    assert!(topology.resolve(node).is_some(), "{node} does not resolve");
                }
            }
        }
        assert_eq!(topology::staged::encode(&topology), data, "not canonical");
    }
});
