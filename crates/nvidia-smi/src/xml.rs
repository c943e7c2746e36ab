//! `nvidia-smi -q -x`: the `<nvidia_smi_log>` document (`nvsmi_device_v13.dtd` element names),
//! written by hand with escaping, one tab per level as nvidia-smi indents.

use crate::layout::{self, Node};
use crate::report::{cuda_text, Report};

/// The `-q -x` document of `report`.
pub fn render(report: &Report) -> String {
    let mut out = String::from(
        "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v13.dtd\">\n<nvidia_smi_log>\n",
    );
    element(&mut out, 1, "timestamp", &report.timestamp);
    element(&mut out, 1, "driver_version", &report.driver_version.text());
    element(
        &mut out,
        1,
        "cuda_version",
        &report.cuda_version.show(cuda_text),
    );
    element(
        &mut out,
        1,
        "attached_gpus",
        &report.attached_gpus.to_string(),
    );
    for gpu in &report.gpus {
        out.push_str(&format!("\t<gpu id=\"{}\">\n", escape(&gpu.id())));
        nodes(&mut out, 2, &layout::gpu(gpu));
        out.push_str("\t</gpu>\n");
    }
    out.push_str("</nvidia_smi_log>\n");
    out
}

fn nodes(out: &mut String, depth: usize, nodes: &[Node]) {
    for node in nodes {
        match node {
            Node::Value { element, value, .. } => self::element(out, depth, element, value),
            Node::Section {
                element, children, ..
            } => {
                let tabs = "\t".repeat(depth);
                out.push_str(&format!("{tabs}<{element}>\n"));
                self::nodes(out, depth + 1, children);
                out.push_str(&format!("{tabs}</{element}>\n"));
            }
        }
    }
}

fn element(out: &mut String, depth: usize, name: &str, value: &str) {
    out.push_str(&format!(
        "{}<{name}>{}</{name}>\n",
        "\t".repeat(depth),
        escape(value)
    ));
}

/// `value` as XML character data or attribute text.
pub fn escape(value: &str) -> String {
    let mut out = String::with_capacity(value.len());
    for char in value.chars() {
        match char {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            // XML 1.0 allows no other control characters, escaped or not.
            c if c.is_control() && !matches!(c, '\t' | '\n' | '\r') => out.push('\u{FFFD}'),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::sample_report;

    #[test]
    fn the_document_has_nvidia_smis_prolog_and_header() {
        let xml = render(&sample_report());
        assert!(xml.starts_with(
            "<?xml version=\"1.0\" ?>\n<!DOCTYPE nvidia_smi_log SYSTEM \"nvsmi_device_v13.dtd\">\n<nvidia_smi_log>\n\t<timestamp>Fri Dec  4 15:12:01 2026</timestamp>\n\t<driver_version>580.65.06</driver_version>\n\t<cuda_version>13.0</cuda_version>\n\t<attached_gpus>4</attached_gpus>\n\t<gpu id=\"00000000:41:00.0\">\n\t\t<product_name>NVIDIA GB200</product_name>\n"
        ), "{xml}");
        assert!(xml.ends_with("\t</gpu>\n</nvidia_smi_log>\n"));
        assert_eq!(xml.matches("<gpu id=").count(), 2);
    }

    #[test]
    fn blocks_nest_with_one_tab_per_level() {
        let xml = render(&sample_report());
        for expected in [
            "\t\t<pci>\n\t\t\t<pci_bus>41</pci_bus>\n\t\t\t<pci_device>00</pci_device>\n\t\t\t<pci_domain>0000</pci_domain>\n\t\t\t<pci_device_id>294110DE</pci_device_id>\n\t\t\t<pci_bus_id>00000000:41:00.0</pci_bus_id>\n\t\t\t<pci_sub_system_id>20D510DE</pci_sub_system_id>\n\t\t\t<pci_gpu_link_info>\n\t\t\t\t<pcie_gen>\n\t\t\t\t\t<max_link_gen>6</max_link_gen>\n\t\t\t\t\t<current_link_gen>6</current_link_gen>\n\t\t\t\t</pcie_gen>\n\t\t\t\t<link_widths>\n\t\t\t\t\t<max_link_width>16x</max_link_width>\n\t\t\t\t\t<current_link_width>16x</current_link_width>\n\t\t\t\t</link_widths>\n\t\t\t</pci_gpu_link_info>\n\t\t</pci>\n",
            "\t\t<mig_mode>\n\t\t\t<current_mig>Disabled</current_mig>\n\t\t\t<pending_mig>Disabled</pending_mig>\n\t\t</mig_mode>\n",
            "\t\t<fb_memory_usage>\n\t\t\t<total>189471 MiB</total>\n\t\t\t<reserved>512 MiB</reserved>\n\t\t\t<used>0 MiB</used>\n\t\t\t<free>188959 MiB</free>\n\t\t</fb_memory_usage>\n",
            "\t\t<fabric>\n\t\t\t<state>Completed</state>\n\t\t\t<status>Success</status>\n\t\t\t<cliqueId>7</cliqueId>\n\t\t\t<clusterUuid>00000000-0000-0000-0000-0000000000ab</clusterUuid>\n\t\t\t<health>\n\t\t\t\t<summary>Healthy</summary>\n\t\t\t\t<bandwidth>Full</bandwidth>\n",
            "\t\t<uuid>GPU-2e97b6a4-1f3c-4d58-8b0e-a5c7d9e1f024</uuid>\n\t\t<minor_number>2</minor_number>\n",
        ] {
            assert!(xml.contains(expected), "{expected:?} missing in\n{xml}");
        }
    }

    #[test]
    fn text_is_escaped() {
        let xml = render(&sample_report());
        assert!(
            xml.contains("<serial>&lt;&amp;&quot;&apos;&gt;</serial>"),
            "{xml}"
        );
        assert_eq!(escape("a\u{1}b\tc"), "a\u{FFFD}b\tc");
    }
}
