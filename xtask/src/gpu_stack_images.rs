//! `cargo xtask gpu-stack-images`: NVIDIA's device plugin (with GPU feature
//! discovery) and node-feature-discovery as image archives, and the device
//! plugin's chart with NFD's as its dependency, all built offline from the
//! pinned modules by the harness's `gpu_stack` (cached: a second run builds
//! nothing). Prints the archives, their references and the chart.

use std::time::Instant;

use anyhow::Result;
use harness::gpu_stack::{self, GpuStack};
use xshell::Shell;

use crate::flags::GpuStackImagesArgs;

/// Builds what is missing and prints where everything is.
pub fn run(sh: &Shell, args: &GpuStackImagesArgs) -> Result<()> {
    let started = Instant::now();
    let stack = gpu_stack::ensure(sh)?;
    if args.json {
        println!("{}", serde_json::to_string_pretty(&as_json(&stack))?);
        return Ok(());
    }
    let rows = [
        ("device plugin + GFD", &stack.device_plugin),
        ("node-feature-discovery", &stack.nfd),
    ];
    for (what, archive) in rows {
        println!("{what:<24} {}  {}", archive.image, archive.path.display());
    }
    println!("{:<24} {}", "chart (NFD in charts/)", stack.chart.display());
    let sets: Vec<String> = stack
        .helm_values()
        .into_iter()
        .map(|(key, value)| format!("{key}={value}"))
        .collect();
    println!("{:<24} --set {}", "helm values", sets.join(","));
    println!(
        "{} in {:.1} s",
        if stack.built {
            "built"
        } else {
            "all from the cache"
        },
        started.elapsed().as_secs_f64()
    );
    Ok(())
}

/// The machine-readable form (`--json`), which `tests/gpu_stack_images.rs` reads.
fn as_json(stack: &GpuStack) -> serde_json::Value {
    let archive = |archive: &gpu_stack::Archive, bin_dir: &std::path::Path| {
        serde_json::json!({
            "image": archive.image.to_string(),
            "repository": archive.image.repository,
            "tag": archive.image.tag,
            "archive": archive.path,
            "bin_dir": bin_dir,
        })
    };
    let values: serde_json::Map<String, serde_json::Value> = stack
        .helm_values()
        .into_iter()
        .map(|(key, value)| (key, serde_json::Value::String(value)))
        .collect();
    serde_json::json!({
        "device_plugin": archive(&stack.device_plugin, &stack.bin_dirs[0]),
        "nfd": archive(&stack.nfd, &stack.bin_dirs[1]),
        "chart": stack.chart,
        "helm_values": values,
        "built": stack.built,
    })
}
