//! One GPU's section as a tree of named values, in nvidia-smi's order, with each entry's `-q`
//! label and `-q -x` element name side by side: the text and XML renderers walk the same tree,
//! so the two outputs cannot drift apart.

use crate::modes::{watts, Pending};
use crate::report::{
    enabled_text, lower_hex, mib, uuid_text, Fabric, FabricState, Gpu, HealthField, Memory,
    Reading, NOT_AVAILABLE,
};

/// An entry of a GPU's section.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Node {
    /// `Label : value` / `<element>value</element>`.
    Value {
        /// The `-q` label.
        label: &'static str,
        /// The `-q -x` element name.
        element: &'static str,
        /// The printed value.
        value: String,
        /// What `-q` prints before the value (`0x` before PCI numbers, which the XML prints
        /// bare).
        text_prefix: &'static str,
    },
    /// A titled block of entries.
    Section {
        /// The `-q` title.
        label: &'static str,
        /// The `-q -x` element name.
        element: &'static str,
        /// Its entries.
        children: Vec<Node>,
    },
}

fn value(label: &'static str, element: &'static str, value: String) -> Node {
    Node::Value {
        label,
        element,
        value,
        text_prefix: "",
    }
}

fn section(label: &'static str, element: &'static str, children: Vec<Node>) -> Node {
    Node::Section {
        label,
        element,
        children,
    }
}

/// The entries of one GPU, in nvidia-smi's order.
pub fn gpu(gpu: &Gpu) -> Vec<Node> {
    let mut nodes = identity(gpu);
    nodes.push(section("PCI", "pci", pci(gpu)));
    nodes.push(section(
        "FB Memory Usage",
        "fb_memory_usage",
        memory(&gpu.memory),
    ));
    nodes.extend(operation(gpu));
    nodes.push(section("Fabric", "fabric", fabric(&gpu.fabric)));
    nodes
}

/// From the product name to the board id.
fn identity(gpu: &Gpu) -> Vec<Node> {
    vec![
        value("Product Name", "product_name", gpu.product_name.text()),
        value(
            "Product Brand",
            "product_brand",
            gpu.brand.show(|brand| brand.text()),
        ),
        value(
            "Product Architecture",
            "product_architecture",
            gpu.architecture.show(|architecture| architecture.text()),
        ),
        value(
            "Persistence Mode",
            "persistence_mode",
            gpu.persistence_mode.show(enabled_text),
        ),
        value(
            "Addressing Mode",
            "addressing_mode",
            gpu.addressing_mode.show(|mode| mode.text()),
        ),
        section(
            "MIG Mode",
            "mig_mode",
            pending(&gpu.mig_mode, ("current_mig", "pending_mig")),
        ),
        value("Serial Number", "serial", gpu.serial.text()),
        value("GPU UUID", "uuid", gpu.uuid.text()),
        value(
            "Minor Number",
            "minor_number",
            gpu.minor_number.show(u32::to_string),
        ),
        value("Board ID", "board_id", gpu.board_id.show(lower_hex)),
    ]
}

/// From the compute mode to the max clocks.
fn operation(gpu: &Gpu) -> Vec<Node> {
    vec![
        value(
            "Compute Mode",
            "compute_mode",
            gpu.compute_mode.show(|mode| mode.text()),
        ),
        section(
            "Utilization",
            "utilization",
            each(
                &gpu.utilization,
                &[
                    ("GPU", "gpu_util", |(gpu, _)| format!("{gpu} %")),
                    ("Memory", "memory_util", |(_, memory)| format!("{memory} %")),
                ],
            ),
        ),
        section(
            "ECC Mode",
            "ecc_mode",
            pending(&gpu.ecc_mode, ("current_ecc", "pending_ecc")),
        ),
        section(
            "Temperature",
            "temperature",
            vec![value(
                "GPU Current Temp",
                "gpu_temp",
                gpu.temperature.show(|celsius| format!("{celsius} C")),
            )],
        ),
        section(
            "GPU Power Readings",
            "gpu_power_readings",
            vec![value(
                "Instantaneous Power Draw",
                "instant_power_draw",
                gpu.power_mw.show(watts),
            )],
        ),
        section("Clocks", "clocks", clocks(&gpu.clocks)),
        section("Max Clocks", "max_clocks", clocks(&gpu.max_clocks)),
    ]
}

/// `Current` / `Pending` of a mode, with their element names.
fn pending(mode: &Reading<Pending>, (current, pending): (&'static str, &'static str)) -> Vec<Node> {
    each(
        mode,
        &[
            ("Current", current, |mode| enabled_text(&mode.current)),
            ("Pending", pending, |mode| enabled_text(&mode.pending)),
        ],
    )
}

/// Graphics, SM, memory and video clocks.
fn clocks(clocks: &[Reading<u32>; 4]) -> Vec<Node> {
    let names = [
        ("Graphics", "graphics_clock"),
        ("SM", "sm_clock"),
        ("Memory", "mem_clock"),
        ("Video", "video_clock"),
    ];
    names
        .iter()
        .zip(clocks)
        .map(|((label, element), clock)| {
            value(label, element, clock.show(|mhz| format!("{mhz} MHz")))
        })
        .collect()
}

/// The PCIe link block inside PCI: generations, then widths (`16x`).
fn link(link: &[Reading<u32>; 4]) -> Node {
    let [max_gen, current_gen, max_width, current_width] = link;
    let width = |lanes: &u32| format!("{lanes}x");
    section(
        "GPU Link Info",
        "pci_gpu_link_info",
        vec![
            section(
                "PCIe Generation",
                "pcie_gen",
                vec![
                    value("Max", "max_link_gen", max_gen.show(u32::to_string)),
                    value(
                        "Current",
                        "current_link_gen",
                        current_gen.show(u32::to_string),
                    ),
                ],
            ),
            section(
                "Link Width",
                "link_widths",
                vec![
                    value("Max", "max_link_width", max_width.show(width)),
                    value("Current", "current_link_width", current_width.show(width)),
                ],
            ),
        ],
    )
}

/// A projection of a block's reading: label, element and how to print the value.
type Field<T> = (&'static str, &'static str, fn(&T) -> String);

/// The same reading's projection for every entry of a block: the value's, or the reading's
/// `N/A` / error text for all of them.
fn each<T>(reading: &Reading<T>, fields: &[Field<T>]) -> Vec<Node> {
    fields
        .iter()
        .map(|(label, element, show)| value(label, element, reading.show(show)))
        .collect()
}

/// The PCI block: the text prints the numbers `0x`-prefixed, the XML bare; then the link.
fn pci(gpu: &Gpu) -> Vec<Node> {
    let pci = &gpu.pci;
    let mut nodes = each(
        pci,
        &[
            ("Bus", "pci_bus", |pci| format!("{:02X}", pci.bus)),
            ("Device", "pci_device", |pci| format!("{:02X}", pci.device)),
            ("Domain", "pci_domain", |pci| format!("{:04X}", pci.domain)),
            ("Device Id", "pci_device_id", |pci| {
                format!("{:08X}", pci.device_id)
            }),
            ("Bus Id", "pci_bus_id", |pci| pci.bus_id.clone()),
            ("Sub System Id", "pci_sub_system_id", |pci| {
                format!("{:08X}", pci.sub_system_id)
            }),
        ],
    );
    if pci.value().is_some() {
        for node in &mut nodes {
            if let Node::Value {
                element,
                text_prefix,
                ..
            } = node
            {
                if *element != "pci_bus_id" {
                    *text_prefix = "0x";
                }
            }
        }
    }
    nodes.push(link(&gpu.link));
    nodes
}

fn memory(memory: &Reading<Memory>) -> Vec<Node> {
    each(
        memory,
        &[
            ("Total", "total", |memory| mib(memory.total)),
            ("Reserved", "reserved", |memory| {
                memory.reserved.map_or(NOT_AVAILABLE.to_owned(), mib)
            }),
            ("Used", "used", |memory| mib(memory.used)),
            ("Free", "free", |memory| mib(memory.free)),
        ],
    )
}

fn fabric(fabric: &Reading<Fabric>) -> Vec<Node> {
    let mut nodes = each(
        fabric,
        &[
            ("State", "state", |fabric| fabric.state.text()),
            ("Status", "status", |fabric| status(fabric)),
            ("CliqueId", "cliqueId", |fabric| {
                fabric.clique_id.to_string()
            }),
            ("ClusterUUID", "clusterUuid", |fabric| {
                uuid_text(&fabric.cluster_uuid)
            }),
        ],
    );
    nodes.push(section("Health", "health", health(fabric)));
    nodes
}

/// nvml.h: the status is meaningful only once the probe has completed.
fn status(fabric: &Fabric) -> String {
    match fabric.state {
        FabricState::Completed => fabric.status.text(),
        _ => NOT_AVAILABLE.to_owned(),
    }
}

fn health(fabric: &Reading<Fabric>) -> Vec<Node> {
    let fabric = fabric.value();
    let summary = fabric
        .and_then(|fabric| fabric.health_summary)
        .map_or(NOT_AVAILABLE.to_owned(), |summary| summary.text());
    let mask = fabric.and_then(|fabric| fabric.health_mask);
    let mut nodes = vec![value("Summary", "summary", summary)];
    for field in HealthField::ALL {
        let (label, element) = match field {
            HealthField::Bandwidth => ("Bandwidth", "bandwidth"),
            HealthField::RouteRecovery => {
                ("Route Recovery in progress", "route_recovery_in_progress")
            }
            HealthField::RouteUnhealthy => ("Route Unhealthy", "route_unhealthy"),
            HealthField::AccessTimeoutRecovery => {
                ("Access Timeout Recovery", "access_timeout_recovery")
            }
            HealthField::IncorrectConfiguration => {
                ("Incorrect Configuration", "incorrect_configuration")
            }
        };
        nodes.push(value(label, element, field.text(mask)));
    }
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_gpu;

    fn find<'a>(nodes: &'a [Node], path: &[&str]) -> &'a Node {
        let (first, rest) = path.split_first().expect("a path");
        let node = nodes
            .iter()
            .find(|node| match node {
                Node::Value { element, .. } | Node::Section { element, .. } => element == first,
            })
            .unwrap_or_else(|| panic!("no {first}"));
        match (node, rest.is_empty()) {
            (_, true) => node,
            (Node::Section { children, .. }, false) => find(children, rest),
            (Node::Value { .. }, false) => panic!("{first} is a value"),
        }
    }

    fn text(nodes: &[Node], path: &[&str]) -> String {
        match find(nodes, path) {
            Node::Value { value, .. } => value.clone(),
            Node::Section { .. } => panic!("{path:?} is a section"),
        }
    }

    #[test]
    fn a_gpu_reads_in_nvidia_smi_order_with_its_values() {
        let nodes = gpu(&sample_gpu());
        let elements: Vec<&str> = nodes
            .iter()
            .map(|node| match node {
                Node::Value { element, .. } | Node::Section { element, .. } => *element,
            })
            .collect();
        assert_eq!(
            elements,
            [
                "product_name",
                "product_brand",
                "product_architecture",
                "persistence_mode",
                "addressing_mode",
                "mig_mode",
                "serial",
                "uuid",
                "minor_number",
                "board_id",
                "pci",
                "fb_memory_usage",
                "compute_mode",
                "utilization",
                "ecc_mode",
                "temperature",
                "gpu_power_readings",
                "clocks",
                "max_clocks",
                "fabric"
            ]
        );
        assert_eq!(text(&nodes, &["pci", "pci_device_id"]), "294110DE");
        assert_eq!(text(&nodes, &["pci", "pci_bus"]), "41");
        assert_eq!(text(&nodes, &["fb_memory_usage", "free"]), "188959 MiB");
        assert_eq!(text(&nodes, &["fabric", "cliqueId"]), "7");
        assert_eq!(text(&nodes, &["fabric", "health", "bandwidth"]), "Full");
        assert_eq!(text(&nodes, &["board_id"]), "0x1b00");
        assert_eq!(text(&nodes, &["addressing_mode"]), "ATS");
        assert_eq!(text(&nodes, &["mig_mode", "current_mig"]), "Disabled");
        assert_eq!(text(&nodes, &["ecc_mode", "pending_ecc"]), "Enabled");
        assert_eq!(
            text(
                &nodes,
                &["pci", "pci_gpu_link_info", "pcie_gen", "max_link_gen"]
            ),
            "6"
        );
        assert_eq!(
            text(
                &nodes,
                &[
                    "pci",
                    "pci_gpu_link_info",
                    "link_widths",
                    "current_link_width"
                ]
            ),
            "16x"
        );
        assert_eq!(text(&nodes, &["utilization", "gpu_util"]), "3 %");
        assert_eq!(text(&nodes, &["utilization", "memory_util"]), "1 %");
        assert_eq!(text(&nodes, &["temperature", "gpu_temp"]), "36 C");
        assert_eq!(
            text(&nodes, &["gpu_power_readings", "instant_power_draw"]),
            "145.00 W"
        );
        assert_eq!(text(&nodes, &["clocks", "mem_clock"]), "3996 MHz");
        assert_eq!(text(&nodes, &["max_clocks", "video_clock"]), "1980 MHz");
        assert_eq!(text(&nodes, &["compute_mode"]), "Default");
    }

    #[test]
    fn an_unsupported_block_is_na_throughout() {
        let mut gpu_report = sample_gpu();
        gpu_report.fabric = Reading::NotAvailable;
        gpu_report.memory = Reading::Failed("Unknown Error".to_owned());
        let nodes = gpu(&gpu_report);
        for path in [
            ["fabric", "state"].as_slice(),
            &["fabric", "status"],
            &["fabric", "cliqueId"],
            &["fabric", "clusterUuid"],
            &["fabric", "health", "summary"],
            &["fabric", "health", "incorrect_configuration"],
        ] {
            assert_eq!(text(&nodes, path), "N/A", "{path:?}");
        }
        assert_eq!(text(&nodes, &["fb_memory_usage", "total"]), "Unknown Error");
    }

    #[test]
    fn the_status_waits_for_a_completed_probe() {
        let mut gpu_report = sample_gpu();
        if let Reading::Value(fabric) = &mut gpu_report.fabric {
            fabric.state = FabricState::InProgress;
        }
        let nodes = gpu(&gpu_report);
        assert_eq!(text(&nodes, &["fabric", "state"]), "In Progress");
        assert_eq!(text(&nodes, &["fabric", "status"]), "N/A");
    }

    fn prefix(nodes: &[Node], path: &[&str]) -> &'static str {
        match find(nodes, path) {
            Node::Value { text_prefix, .. } => text_prefix,
            Node::Section { .. } => panic!("{path:?} is a section"),
        }
    }

    #[test]
    fn pci_numbers_get_0x_in_the_text_only() {
        let nodes = gpu(&sample_gpu());
        assert_eq!(prefix(&nodes, &["pci", "pci_device_id"]), "0x");
        assert_eq!(prefix(&nodes, &["pci", "pci_bus_id"]), "");
        assert_eq!(prefix(&nodes, &["uuid"]), "");
        let mut unsupported = sample_gpu();
        unsupported.pci = Reading::NotAvailable;
        let nodes = gpu(&unsupported);
        assert_eq!(prefix(&nodes, &["pci", "pci_bus"]), "");
        assert_eq!(text(&nodes, &["pci", "pci_bus"]), "N/A");
    }
}
