use super::*;

fn gb200() -> Profile {
    let path = crate::project_root().join("manifests/helm/nvml-mock/profiles/gb200.yaml");
    Profile::parse(&std::fs::read_to_string(path).expect("read")).expect("parse")
}

/// A ResourceSlice as NVIDIA's plugin publishes one GB200 (values as seen on a real cluster).
fn slice(node: &str, devices: Value) -> Value {
    json!({"spec": {"driver": DRIVER, "nodeName": node, "pool": {"name": node}, "devices": devices}})
}

fn published_gpu0(taints: Value) -> Value {
    json!({
        "name": "gpu-0",
        "attributes": {
            "type": {"string": "gpu"},
            "uuid": {"string": gb200().device(0).expect("gpu 0").uuid},
            "productName": {"string": "NVIDIA GB200"},
            "brand": {"string": "Nvidia"},
            "architecture": {"string": "Blackwell"},
            "cudaComputeCapability": {"version": "10.0.0"},
            "driverVersion": {"version": "580.65.6"},
            "cudaDriverVersion": {"version": "13.0.0"},
            "resource.kubernetes.io/pciBusID": {"string": gb200().device(0).expect("gpu 0").pci_bus_id.to_string()},
            "addressingMode": {"string": "ATS"},
        },
        "capacity": {"memory": {"value": "194018080Ki"}},
        "taints": taints,
    })
}

#[test]
fn gb200_devices_are_named_by_minor_with_nvlibs_strings_and_semver_versions() {
    let want = expected_devices(&gb200());
    assert_eq!(want.len(), 4);
    let gpu0 = &want["gpu-0"];
    let get = |key: &str| gpu0.attributes[key].clone();
    assert_eq!(get("type"), Attr::String("gpu".to_owned()));
    assert_eq!(get("productName"), Attr::String("NVIDIA GB200".to_owned()));
    assert_eq!(get("brand"), Attr::String("Nvidia".to_owned()));
    assert_eq!(get("architecture"), Attr::String("Blackwell".to_owned()));
    assert_eq!(
        get("cudaComputeCapability"),
        Attr::Version("10.0.0".to_owned())
    );
    // 580.65.06: semver drops the leading zero; CUDA 13000 is 13.0.
    assert_eq!(get("driverVersion"), Attr::Version("580.65.6".to_owned()));
    assert_eq!(get("cudaDriverVersion"), Attr::Version("13.0.0".to_owned()));
    assert_eq!(gpu0.memory, Some(198_674_513_920));
    for (index, device) in gb200().devices().iter().enumerate() {
        let name = format!("gpu-{}", device.minor_number);
        assert_eq!(
            want[&name].attributes["uuid"],
            Attr::String(device.uuid.clone()),
            "GPU {index}"
        );
        assert_eq!(
            want[&name].attributes[PCI_BUS_ID],
            Attr::String(device.pci_bus_id.to_string())
        );
    }
}

#[test]
fn a_published_device_equal_to_the_profile_matches_and_each_difference_is_named() {
    let want = expected_devices(&gb200());
    let only0: BTreeMap<String, SliceDevice> = want
        .iter()
        .filter(|(name, _)| *name == "gpu-0")
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect();
    let seen = node_devices(&[slice("n1", json!([published_gpu0(json!(null))]))], "n1");
    assert_eq!(device_mismatches(&only0, &seen), Vec::<String>::new());
    // Extra attributes (addressingMode) are allowed; the others are quoted.
    assert!(attributes_line(&seen["gpu-0"]).contains("productName=NVIDIA GB200"));

    let mut wrong = published_gpu0(json!(null));
    wrong["attributes"]["brand"] = json!({"string": "Tesla"});
    wrong["capacity"]["memory"]["value"] = json!("185Gi");
    let seen = node_devices(&[slice("n1", json!([wrong]))], "n1");
    let off = device_mismatches(&want, &seen);
    assert!(
        off.iter()
            .any(|it| it.contains("gpu-0 brand: want Nvidia, got Tesla")),
        "{off:?}"
    );
    assert!(off.iter().any(|it| it.contains("gpu-0 memory")), "{off:?}");
    assert!(off.iter().any(|it| it == "gpu-1 not published"), "{off:?}");
    // Another node's and another driver's slices do not count.
    let other = json!({"spec": {"driver": "compute-domain.nvidia.com", "nodeName": "n1", "devices": [published_gpu0(json!(null))]}});
    assert!(node_devices(
        &[slice("n2", json!([published_gpu0(json!(null))])), other],
        "n1"
    )
    .is_empty());
}

#[test]
fn quantities_parse_to_bytes() {
    assert_eq!(quantity_bytes("194018080Ki"), Some(198_674_513_920));
    assert_eq!(quantity_bytes("80Gi"), Some(80 << 30));
    assert_eq!(quantity_bytes("1000"), Some(1000));
    assert_eq!(quantity_bytes("2k"), Some(2000));
    assert_eq!(quantity_bytes("1.5Gi"), None);
    assert_eq!(quantity_bytes("x"), None);
}

#[test]
fn the_values_turn_gpus_and_the_health_gate_on_and_keep_scenario_4s() {
    let base = "nvidiaDriverRoot: /var/lib/nvml-mock/driver\nresources:\n  gpus:\n    enabled: false\n  computeDomains:\n    enabled: true\n";
    let values: Value = serde_yaml::from_str(&chart_values(base).expect("values")).expect("YAML");
    assert_eq!(values["resources"]["gpus"]["enabled"], true);
    assert_eq!(values["resources"]["computeDomains"]["enabled"], true);
    assert_eq!(values["gpuResourcesEnabledOverride"], true);
    assert_eq!(values["featureGates"]["NVMLDeviceHealthCheck"], true);
    assert_eq!(values["nvidiaDriverRoot"], "/var/lib/nvml-mock/driver");
}

#[test]
fn the_claim_selects_the_product_by_cel_and_its_allocation_is_read() {
    let claim = claim("c", "ns", "NVIDIA GB200");
    let request = &claim["spec"]["devices"]["requests"][0]["exactly"];
    assert_eq!(request["deviceClassName"], DRIVER);
    assert_eq!(request["count"], 1);
    assert_eq!(
        request["selectors"][0]["cel"]["expression"],
        "device.attributes[\"gpu.nvidia.com\"].productName == \"NVIDIA GB200\""
    );
    let pod = claim_pod("p", "ns", "n1", "img", "c");
    assert_eq!(pod["spec"]["resourceClaims"][0]["resourceClaimName"], "c");
    assert_eq!(
        pod["spec"]["containers"][0]["resources"]["claims"][0]["name"],
        "gpu"
    );
    assert!(pod["spec"]["nodeName"].is_null());

    let status = json!({"status": {"allocation": {"devices": {"results": [
        {"request": "gpu", "driver": DRIVER, "pool": "n1", "device": "gpu-2"},
        {"request": "x", "driver": "other", "pool": "n1", "device": "d"},
    ]}}}});
    assert_eq!(
        allocated(&status),
        vec![("n1".to_owned(), "gpu-2".to_owned())]
    );
    assert!(allocated(&json!({})).is_empty());
}

#[test]
fn feature_gates_are_read_from_the_metrics() {
    let metrics = "# HELP kubernetes_feature_enabled x\n\
        kubernetes_feature_enabled{name=\"DRADeviceTaints\",stage=\"ALPHA\"} 1\n\
        kubernetes_feature_enabled{name=\"DRADeviceTaintRules\",stage=\"ALPHA\"} 0\n\
        kubernetes_feature_enabled{name=\"DRA\",stage=\"\"} 0\n";
    assert_eq!(feature_enabled(metrics, TAINTS_GATE), Some(true));
    assert_eq!(feature_enabled(metrics, "DRADeviceTaintRules"), Some(false));
    assert_eq!(feature_enabled(metrics, "DRA"), Some(false));
    assert_eq!(feature_enabled(metrics, "Nope"), None);
}

#[test]
fn a_lost_gpu_taints_its_tray_only() {
    let xid = json!([
        {"key": XID_TAINT, "value": "79", "effect": "NoSchedule"},
        {"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}
    ]);
    let lost = json!([{"key": "gpu.nvidia.com/gpu-lost", "effect": "NoSchedule"}]);
    let mut gpu1 = published_gpu0(lost);
    gpu1["name"] = json!("gpu-1");
    let slices = [
        slice("n1", json!([published_gpu0(xid), gpu1.clone()])),
        slice("n2", json!([published_gpu0(json!(null))])),
    ];
    let seen: BTreeMap<String, BTreeMap<String, SliceDevice>> = ["n1", "n2"]
        .iter()
        .map(|node| ((*node).to_owned(), node_devices(&slices, node)))
        .collect();
    assert_eq!(lost_tainted(&seen, ("n1", "gpu-0"), 79), Ok(()));
    assert_eq!(tainted(&seen).len(), 2);
    let wrong = lost_tainted(&seen, ("n1", "gpu-1"), 79).expect_err("other device");
    assert!(wrong.contains("n1/gpu-1: taints"), "{wrong}");
    assert!(lost_tainted(&seen, ("n1", "gpu-0"), 48).is_err());
    assert!(lost_tainted(&seen, ("n3", "gpu-0"), 79).is_err());
    // A tray whose other GPU stays untainted, or another tray tainted: not the lost pattern.
    gpu1["taints"] = json!(null);
    let slices = [
        slice(
            "n1",
            json!([
                published_gpu0(json!([{"key": XID_TAINT, "value": "79", "effect": "NoSchedule"}])),
                gpu1
            ]),
        ),
        slice(
            "n2",
            json!([published_gpu0(
                json!([{"key": "x", "effect": "NoSchedule"}])
            )]),
        ),
    ];
    let seen: BTreeMap<String, BTreeMap<String, SliceDevice>> = ["n1", "n2"]
        .iter()
        .map(|node| ((*node).to_owned(), node_devices(&slices, node)))
        .collect();
    let wrong = lost_tainted(&seen, ("n1", "gpu-0"), 79).expect_err("untainted sibling");
    assert!(
        wrong.contains("n1/gpu-1: untainted") && wrong.contains("n2/gpu-0 tainted too"),
        "{wrong}"
    );
}
