//! Latency of what a consumer such as check-fabric does, in process, through the exported C
//! functions of the built `.so` (`dlopen`ed): `nvmlInit_v2` (which reads and parses the profile and topology, the reference count
//! going 0 → 1) → count → a handle and a `GetGpuFabricInfoV` (v3) query on every GPU →
//! `nvmlShutdown`. Also the warm fabric query alone.
//!
//! `cargo bench -p mock-nvml --bench init_fabric` (add `-- <cycles>` to change the sample size).
//! Uses the shipped gb200 profile and the demo topology (`tests/nvml/topology-demo.yaml`) as
//! `nvml-mock-compute-domain-worker3`.

use std::time::{Duration, Instant};

#[path = "../tests/common/mod.rs"]
mod common;

/// The calls, through the built `.so`'s exports (`dlopen`, as every client reaches it).
#[allow(unsafe_code)]
mod calls {
    use std::ffi::c_void;

    use libloading::{Library, Symbol};

    /// `NVML_SUCCESS`.
    const SUCCESS: u32 = 0;
    /// `nvmlGpuFabricInfo_v3`: `sizeof(nvmlGpuFabricInfo_v3_t) | 3 << 24`.
    const GPU_FABRIC_INFO_V3: u32 = 0x0300_0028;

    /// `nvmlGpuFabricInfo_v3_t`.
    #[repr(C)]
    #[derive(Default)]
    struct FabricInfoV3 {
        version: u32,
        cluster_uuid: [u8; 16],
        status: u32,
        clique_id: u32,
        state: u8,
        health_mask: u32,
        health_summary: u8,
    }

    type Device = *mut c_void;

    /// The symbol `name` as a function pointer of type `F`.
    ///
    /// # Safety
    /// `F` must be the symbol's C signature.
    unsafe fn entry<F: Copy>(library: &Library, name: &[u8]) -> F {
        // SAFETY: the caller vouches for the type.
        let symbol: Symbol<'_, F> = unsafe { library.get(name) }
            .unwrap_or_else(|err| panic!("{}: {err}", String::from_utf8_lossy(name)));
        *symbol
    }

    /// The entry points the cycle calls.
    pub struct Nvml {
        init: unsafe extern "C" fn() -> u32,
        shutdown: unsafe extern "C" fn() -> u32,
        count: unsafe extern "C" fn(*mut u32) -> u32,
        handle: unsafe extern "C" fn(u32, *mut Device) -> u32,
        fabric: unsafe extern "C" fn(Device, *mut FabricInfoV3) -> u32,
        _library: Library,
    }

    impl Nvml {
        /// Loads the library cargo built beside this benchmark.
        pub fn load() -> Nvml {
            let path = super::common::library();
            // SAFETY: the mock library's initialisers only set up its own statics.
            let library = unsafe { Library::new(&path) }
                .unwrap_or_else(|err| panic!("dlopen {}: {err}", path.display()));
            // SAFETY: each type is the `extern "C"` signature nvml.h declares for the name; the
            // pointers stay valid while `_library` is held in the same struct.
            unsafe {
                Nvml {
                    init: entry(&library, b"nvmlInit_v2"),
                    shutdown: entry(&library, b"nvmlShutdown"),
                    count: entry(&library, b"nvmlDeviceGetCount_v2"),
                    handle: entry(&library, b"nvmlDeviceGetHandleByIndex_v2"),
                    fabric: entry(&library, b"nvmlDeviceGetGpuFabricInfoV"),
                    _library: library,
                }
            }
        }

        /// `nvmlInit_v2`, which must succeed.
        pub fn init(&self) {
            // SAFETY: no arguments.
            assert_eq!(unsafe { (self.init)() }, SUCCESS);
        }

        /// `nvmlShutdown`, which must succeed.
        pub fn shutdown(&self) {
            // SAFETY: no arguments.
            assert_eq!(unsafe { (self.shutdown)() }, SUCCESS);
        }

        /// Count, then a handle and a v3 fabric query per GPU; returns the GPUs seen, checking
        /// each answer so the work cannot be optimised away.
        pub fn fabric_on_every_gpu(&self) -> u32 {
            let mut count = 0;
            // SAFETY: `count` is a live out slot.
            assert_eq!(unsafe { (self.count)(&mut count) }, SUCCESS);
            for index in 0..count {
                let mut device = std::ptr::null_mut();
                // SAFETY: `device` is a live out slot.
                assert_eq!(unsafe { (self.handle)(index, &mut device) }, SUCCESS);
                let mut info = FabricInfoV3 {
                    version: GPU_FABRIC_INFO_V3,
                    ..FabricInfoV3::default()
                };
                // SAFETY: `device` was just issued and `info` is a live v3 struct.
                assert_eq!(unsafe { (self.fabric)(device, &mut info) }, SUCCESS);
                assert_eq!((info.clique_id, info.state), (1, 3));
            }
            count
        }
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
    // The library reads staged files: stage the shipped YAML into a temp dir first.
    let staged = tempfile::tempdir().unwrap_or_else(|err| panic!("temp dir: {err}"));
    let profile = test_support::staged::stage_profile(
        &root.join("manifests/helm/nvml-mock/profiles/gb200.yaml"),
        &staged.path().join("profile.bin"),
    );
    let topology = test_support::staged::stage_topology(
        &root.join("tests/nvml/topology-demo.yaml"),
        &staged.path().join("topology.bin"),
    );
    std::env::set_var("MOCK_NVML_CONFIG", profile);
    std::env::set_var("MOCK_TOPOLOGY_CONFIG", topology);
    std::env::set_var("NODE_NAME", "nvml-mock-compute-domain-worker3");
    std::env::set_var("MOCK_NVML_STRICT", "1");

    let nvml = calls::Nvml::load();
    let cycle = || {
        nvml.init();
        let gpus = nvml.fabric_on_every_gpu();
        nvml.shutdown();
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

    nvml.init();
    let mut warm = Vec::with_capacity(cycles);
    for _ in 0..cycles {
        let start = Instant::now();
        nvml.fabric_on_every_gpu();
        warm.push(start.elapsed());
    }
    nvml.shutdown();
    summary("initialised: count + handle + fabric v3 on 4 GPUs", warm);
}
