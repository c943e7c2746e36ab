use super::*;

fn workers() -> Vec<String> {
    crate::kind_workers("nvml-mock-compute-domain", 4)
}

fn demo() -> Topology {
    crate::demo(&workers())
}

/// Two domains, an empty name, the largest clique id, an empty clique.
fn varied() -> Topology {
    let text = "version: 1\ndomains:\n  - name: a\n    uuid: 00000000-0000-0000-0000-0000000000ab\n    cliques:\n      - {id: 0, nodes: [n1, n2]}\n      - {id: 4294967295, nodes: [n3]}\n  - uuid: 000000000000000000000000000000FF\n    cliques:\n      - {id: 0, nodes: []}\n";
    crate::parse(text).expect("a valid document")
}

#[test]
fn the_demo_topologies_round_trip() {
    for topology in [demo(), varied(), crate::rebind(&workers())] {
        let bytes = encode(&topology);
        assert_eq!(&bytes[..8], b"cdsimTOP");
        assert_eq!(bytes[8..12], FORMAT_VERSION.to_le_bytes());
        assert_eq!(decode(&bytes), Ok(topology));
    }
}

#[test]
fn yaml_is_named_with_the_command_that_stages_it() {
    let yaml = varied().to_yaml();
    let err = decode(yaml.as_bytes()).expect_err("YAML is not staged");
    assert_eq!(
        err.to_string(),
        "text (a YAML document?), not a staged file; the library reads a staged topology: \
         `nvml-mock-stager compile-topology <yaml> --out <file>` writes one"
    );
    let empty = decode(b"").expect_err("empty");
    assert!(empty.to_string().starts_with("an empty file; "), "{empty}");
    let binary = decode(&[0xff; 40]).expect_err("binary");
    assert!(
        binary
            .to_string()
            .starts_with("not a staged file (no cdsim header); "),
        "{binary}"
    );
}

#[test]
fn another_kind_or_version_is_refused_by_name() {
    let mut bytes = encode(&demo());
    bytes[..8].copy_from_slice(&PROFILE.magic);
    let err = decode(&bytes).expect_err("a profile's magic");
    assert!(err.to_string().starts_with("a staged profile; "), "{err}");

    let mut bytes = encode(&demo());
    bytes[8..12].copy_from_slice(&(FORMAT_VERSION + 1).to_le_bytes());
    assert_eq!(
        decode(&bytes),
        Err(Error::Staged(FormatError::Version {
            what: "topology",
            command: "compile-topology",
            found: FORMAT_VERSION + 1,
            expected: FORMAT_VERSION,
        }))
    );
}

#[test]
fn trailing_bytes_and_an_invalid_document_are_refused() {
    let mut bytes = encode(&demo());
    bytes.push(0);
    let err = decode(&bytes).expect_err("trailing byte");
    assert!(
        matches!(err, Error::Staged(FormatError::Corrupt { .. })),
        "{err}"
    );

    // Encoding does not validate; decoding does, as parsing would.
    let mut invalid = demo();
    let node = invalid.domains[0].cliques[0].nodes[0].clone();
    invalid.domains[0].cliques[1].nodes.push(node);
    let err = decode(&encode(&invalid)).expect_err("a node in two cliques");
    assert!(matches!(err, Error::DuplicateNode { .. }), "{err}");
}

/// Every truncation and every single-bit flip of a real encoding decodes to an error or to a
/// valid document, never a panic.
#[test]
fn decode_never_panics_on_truncations_or_bit_flips() {
    let bytes = encode(&varied());
    for len in 0..bytes.len() {
        assert!(decode(&bytes[..len]).is_err(), "truncated to {len}");
    }
    let mut flipped = bytes.clone();
    for index in 0..bytes.len() {
        for bit in 0..8 {
            flipped[index] ^= 1 << bit;
            if let Ok(topology) = decode(&flipped) {
                assert_eq!(topology.validate(), Ok(()));
            }
            flipped[index] ^= 1 << bit;
        }
    }
    // Lengths far beyond the input are refused without allocating them.
    let mut huge = bytes[..HEADER_LEN + 4].to_vec();
    huge.extend_from_slice(&u32::MAX.to_le_bytes());
    assert!(decode(&huge).is_err());
}

/// The encoding of the demo topology, pinned: a change to a staged type changes it, and then
/// FORMAT_VERSION must be bumped (old files must be refused, not misread) and this pin updated.
#[test]
fn the_encoding_is_pinned_to_the_format_version() {
    let bytes = encode(&demo());
    assert_eq!(
        (FORMAT_VERSION, bytes.len(), fnv1a(&bytes)),
        (1, 214, 14622482639464548226),
        "the staged topology encoding changed: bump FORMAT_VERSION and update this pin"
    );
}

/// FNV-1a, 64-bit: a stable fingerprint without a dependency.
pub(crate) fn fnv1a(bytes: &[u8]) -> u64 {
    bytes.iter().fold(0xcbf2_9ce4_8422_2325, |hash, byte| {
        (hash ^ u64::from(*byte)).wrapping_mul(0x0100_0000_01b3)
    })
}
