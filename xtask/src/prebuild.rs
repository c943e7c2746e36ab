//! `cargo xtask prebuild`: every input the demo's scenarios take from the
//! cache, built without a cluster, in the order the demo needs them: the
//! offline node images, NVIDIA's DRA driver (scenario 4's Go build and CDI
//! hook), the GPU stack's images (scenario 5). Each part goes on when an
//! earlier one failed; the command fails naming every part that did.
//!
//! Every part is cached under a lock of its own (`node-image.lock`, harness's
//! `cached`), so a demo started meanwhile waits for the part it needs instead
//! of building it again. CI runs this in the background (`ci/background.rs`).

use std::time::Instant;

use anyhow::Result;
use xshell::Shell;

/// One part: its name and what builds it.
type Part = (&'static str, fn(&Shell) -> Result<String>);

/// The parts, in the order the demo needs them.
const PARTS: [Part; 3] = [
    ("node images", node_images),
    ("DRA driver", dra_driver),
    ("GPU stack images", gpu_stack),
];

/// Builds every part; fails naming the parts that failed.
pub fn run(sh: &Shell) -> Result<()> {
    let mut failed = Vec::new();
    for (name, build) in PARTS {
        let started = Instant::now();
        eprintln!("==> prebuild: {name}");
        match build(sh) {
            Ok(what) => eprintln!(
                "    {name}: {what} ({:.0} s)",
                started.elapsed().as_secs_f64()
            ),
            Err(err) => {
                eprintln!("ERROR: prebuild: {name}: {err:#}");
                failed.push(name);
            }
        }
    }
    anyhow::ensure!(
        failed.is_empty(),
        "prebuild: {} failed (above)",
        failed.join(", ")
    );
    Ok(())
}

fn node_images(sh: &Shell) -> Result<String> {
    let images = crate::node_image::ensure_node_images(sh, false)?;
    Ok(format!("{} and {}", images.control_plane, images.worker))
}

fn dra_driver(sh: &Shell) -> Result<String> {
    let dir = harness::scenario4::image::prebuild(sh)?;
    Ok(dir.display().to_string())
}

fn gpu_stack(sh: &Shell) -> Result<String> {
    let stack = harness::gpu_stack::ensure(sh)?;
    Ok(format!(
        "{} and {}",
        stack.device_plugin.image, stack.nfd.image
    ))
}
