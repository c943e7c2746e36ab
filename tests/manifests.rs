//! Every shipped manifest that carries a topology or a GPU profile parses and
//! validates with the same crates the library and the stager use.

use integration_tests::repo_root;

fn read(relative: &str) -> String {
    let path = repo_root().join(relative);
    std::fs::read_to_string(&path)
        .unwrap_or_else(|err| panic!("cannot read {}: {err}", path.display()))
}

/// The topology document inside a Helm values fragment (`topology.domains`).
fn topology_from_values(values: &str) -> topology::Topology {
    let values: serde_yaml::Value = serde_yaml::from_str(values).expect("values are YAML");
    let domains = values
        .get("topology")
        .and_then(|it| it.get("domains"))
        .expect("the values fragment has topology.domains");
    let document = format!(
        "version: 1\ndomains:\n{}",
        indent(&serde_yaml::to_string(domains).expect("domains serialise"))
    );
    topology::parse(&document).unwrap_or_else(|err| panic!("shipped topology is invalid: {err}"))
}

fn indent(text: &str) -> String {
    text.lines().map(|line| format!("  {line}\n")).collect()
}

#[test]
fn demo_topology_values_validate_and_match_the_generator() {
    let shipped = topology_from_values(&read("manifests/demo/topology.yaml"));
    let workers = topology::kind_workers("nvml-mock-compute-domain", 4);
    assert_eq!(
        shipped,
        topology::demo(&workers),
        "manifests/demo/topology.yaml drifted from topology::demo"
    );
}

#[test]
fn chart_default_topology_is_valid() {
    let values = read("manifests/helm/nvml-mock/values.yaml");
    let shipped = topology_from_values(&values);
    assert!(
        shipped.domains.is_empty(),
        "the chart ships no topology by default"
    );
}

#[test]
fn every_shipped_profile_parses() {
    let dir = repo_root().join("manifests/helm/nvml-mock/profiles");
    let mut seen = Vec::new();
    for entry in
        std::fs::read_dir(&dir).unwrap_or_else(|err| panic!("cannot list {}: {err}", dir.display()))
    {
        let path = entry.expect("directory entry").path();
        if path.extension().and_then(|it| it.to_str()) != Some("yaml") {
            continue;
        }
        let text = std::fs::read_to_string(&path).expect("profile is readable");
        let profile = nvml_profile::Profile::parse(&text)
            .unwrap_or_else(|err| panic!("{} does not parse: {err}", path.display()));
        seen.push((
            profile.name().to_owned(),
            profile.device_count(),
            profile.has_fabric(),
        ));
    }
    seen.sort();
    assert_eq!(
        seen,
        vec![
            ("a100".to_owned(), 8, false),
            ("b200".to_owned(), 8, false),
            ("gb200".to_owned(), 4, true),
            ("gb300".to_owned(), 8, true),
            ("h100".to_owned(), 8, false),
            ("l40s".to_owned(), 8, false),
            ("t4".to_owned(), 4, false),
        ],
        "the seven shipped profiles with their GPU counts and fabric support"
    );
}
