//! Latency of what a consumer such as check-fabric does, in process, through the exported C
//! functions: `nvmlInit_v2` (which reads and parses the profile and topology, the reference count
//! going 0 → 1) → count → a handle and a `GetGpuFabricInfoV` (v3) query on every GPU →
//! `nvmlShutdown`. Also the warm fabric query alone.
//!
//! `cargo bench -p mock-nvml --bench init_fabric` (add `-- <cycles>` to change the sample size).
//! Uses the shipped gb200 profile and the demo topology (`tests/nvml/topology-demo.yaml`) as
//! `nvml-mock-compute-domain-worker3`.

use std::time::{Duration, Instant};

use nvidia_ml::{abi, ffi};

/// The calls, through the same `extern "C"` functions the `.so` exports.
#[allow(unsafe_code)]
mod calls {
    use std::ptr::null_mut;

    use nvidia_ml::{abi, ffi};

    /// Count, then a handle and a v3 fabric query per GPU; returns the GPUs seen, checking each
    /// answer so the work cannot be optimised away.
    pub fn fabric_on_every_gpu() -> u32 {
        let mut count = 0;
        // SAFETY: `count` is a live out slot.
        assert_eq!(
            unsafe { ffi::nvmlDeviceGetCount_v2(&mut count) },
            abi::SUCCESS
        );
        for index in 0..count {
            let mut device = null_mut();
            // SAFETY: `device` is a live out slot.
            assert_eq!(
                unsafe { ffi::nvmlDeviceGetHandleByIndex_v2(index, &mut device) },
                abi::SUCCESS
            );
            // SAFETY: an all-zero fabric struct is valid plain data.
            let mut info: abi::GpuFabricInfoV3 = unsafe { std::mem::zeroed() };
            info.version = abi::GPU_FABRIC_INFO_V3;
            // SAFETY: `device` was just issued and `info` is a live v3 struct.
            assert_eq!(
                unsafe { ffi::nvmlDeviceGetGpuFabricInfoV(device, &mut info) },
                abi::SUCCESS
            );
            assert_eq!((info.clique_id, info.state), (1, 3));
        }
        count
    }
}

fn summary(label: &str, mut samples: Vec<Duration>) {
    samples.sort();
    let pick = |quantile: f64| samples[((samples.len() - 1) as f64 * quantile).round() as usize];
    let mean = samples.iter().sum::<Duration>() / samples.len() as u32;
    println!(
        "{label}: n={} min={:?} median={:?} p90={:?} p99={:?} max={:?} mean={:?}",
        samples.len(),
        samples[0],
        pick(0.5),
        pick(0.9),
        pick(0.99),
        samples[samples.len() - 1],
        mean
    );
}

fn main() {
    let cycles: usize = std::env::args()
        .skip(1)
        .find_map(|arg| arg.parse().ok())
        .unwrap_or(2000);
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    std::env::set_var(
        "MOCK_NVML_CONFIG",
        root.join("manifests/helm/nvml-mock/profiles/gb200.yaml"),
    );
    std::env::set_var(
        "MOCK_TOPOLOGY_CONFIG",
        root.join("tests/nvml/topology-demo.yaml"),
    );
    std::env::set_var("NODE_NAME", "nvml-mock-compute-domain-worker3");
    std::env::set_var("MOCK_NVML_STRICT", "1");

    let cycle = || {
        assert_eq!(ffi::nvmlInit_v2(), abi::SUCCESS);
        let gpus = calls::fabric_on_every_gpu();
        assert_eq!(ffi::nvmlShutdown(), abi::SUCCESS);
        gpus
    };
    for _ in 0..cycles / 10 {
        cycle();
    }
    let mut samples = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let start = Instant::now();
        let gpus = cycle();
        samples.push(start.elapsed());
        assert_eq!(gpus, 4);
    }
    summary("init -> fabric v3 on 4 GPUs -> shutdown", samples);

    assert_eq!(ffi::nvmlInit_v2(), abi::SUCCESS);
    let mut warm = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let start = Instant::now();
        calls::fabric_on_every_gpu();
        warm.push(start.elapsed());
    }
    assert_eq!(ffi::nvmlShutdown(), abi::SUCCESS);
    summary("initialised: count + handle + fabric v3 on 4 GPUs", warm);
}
