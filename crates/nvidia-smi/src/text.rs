//! `nvidia-smi -q`: the indented `Label : value` text, labels padded so every colon stands in
//! column 55 (nvidia-smi 570 and later), four spaces per level.

use crate::layout::{self, Node};
use crate::report::{cuda_text, Report};

/// The column of the colon.
const COLON_AT: usize = 55;

/// The `-q` text of `report`.
pub fn render(report: &Report) -> String {
    let mut out = String::from("\n==============NVSMI LOG==============\n\n");
    line(&mut out, 0, "Timestamp", &report.timestamp);
    line(&mut out, 0, "Driver Version", &report.driver_version.text());
    line(
        &mut out,
        0,
        "CUDA Version",
        &report.cuda_version.show(cuda_text),
    );
    out.push('\n');
    line(
        &mut out,
        0,
        "Attached GPUs",
        &report.attached_gpus.to_string(),
    );
    for gpu in &report.gpus {
        out.push_str(&format!("GPU {}\n", gpu.id()));
        nodes(&mut out, 1, &layout::gpu(gpu));
        out.push('\n');
    }
    out
}

fn nodes(out: &mut String, depth: usize, nodes: &[Node]) {
    for node in nodes {
        match node {
            Node::Value {
                label,
                value,
                text_prefix,
                ..
            } => line(out, depth, label, &format!("{text_prefix}{value}")),
            Node::Section {
                label, children, ..
            } => {
                out.push_str(&format!("{}{label}\n", indent(depth)));
                self::nodes(out, depth + 1, children);
            }
        }
    }
}

fn indent(depth: usize) -> String {
    " ".repeat(depth * 4)
}

fn line(out: &mut String, depth: usize, label: &str, value: &str) {
    let key = format!("{}{label}", indent(depth));
    out.push_str(&format!("{key:<COLON_AT$}: {value}\n"));
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::{sample_report, Reading};

    #[test]
    fn the_header_and_every_value_line_up_at_column_55() {
        let text = render(&sample_report());
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(
            lines[..3],
            ["", "==============NVSMI LOG==============", ""]
        );
        for line in &lines {
            if let Some(at) = line.find(" : ") {
                assert_eq!(at + 1, COLON_AT, "{line:?}");
            }
        }
        assert!(text.contains(&format!(
            "{:<55}: Fri Dec  4 15:12:01 2026\n{:<55}: 580.65.06\n{:<55}: 13.0\n\n{:<55}: 4\nGPU 00000000:41:00.0\n",
            "Timestamp", "Driver Version", "CUDA Version", "Attached GPUs"
        )));
    }

    #[test]
    fn sections_indent_four_spaces_per_level() {
        let text = render(&sample_report());
        for expected in [
            format!("{:<55}: NVIDIA GB200", "    Product Name"),
            format!("{:<55}: NVIDIA", "    Product Brand"),
            format!("{:<55}: Blackwell", "    Product Architecture"),
            format!("{:<55}: 2", "    Minor Number"),
            "    PCI\n".to_owned(),
            format!("{:<55}: 0x294110DE", "        Device Id"),
            format!("{:<55}: 00000000:41:00.0", "        Bus Id"),
            format!("{:<55}: 0x20D510DE", "        Sub System Id"),
            format!("{:<55}: 512 MiB", "        Reserved"),
            format!("{:<55}: 188959 MiB", "        Free"),
            format!("{:<55}: Completed", "        State"),
            format!("{:<55}: Success", "        Status"),
            format!("{:<55}: 7", "        CliqueId"),
            format!(
                "{:<55}: 00000000-0000-0000-0000-0000000000ab",
                "        ClusterUUID"
            ),
            format!("{:<55}: Healthy", "            Summary"),
            format!("{:<55}: Full", "            Bandwidth"),
        ] {
            assert!(text.contains(&expected), "{expected:?} missing in\n{text}");
        }
    }

    #[test]
    fn each_gpu_ends_with_a_blank_line_and_unsupported_values_say_na() {
        let mut report = sample_report();
        report.cuda_version = Reading::NotAvailable;
        let text = render(&report);
        assert!(text.contains(&format!("{:<55}: N/A\n", "CUDA Version")));
        assert_eq!(text.matches("\nGPU 00000000:41:00.0\n").count(), 2);
        assert!(text.ends_with("\n\n"));
        let second = &text[text.rfind("GPU 0000").expect("a GPU")..];
        assert!(second.contains(&format!("{:<55}: N/A\n", "        ClusterUUID")));
    }
}
