//! The MIG lifecycle (`mock-nvml`'s `partition.rs`, included by path: the crate is a cdylib)
//! under any sequence of calls on a shipped MIG table, and the node's MIG state file
//! (`node_layout::mig_state`) it is stored in.
//!
//! For any input: no call panics; after every call the partition holds NVML's invariants (no two
//! GPU instances share a memory slice, each sits on a placement its profile offers, no profile
//! has more instances than its row allows, the compute slices in use stay within the GPU's,
//! GPU instance ids unique within the GPU and compute instance ids within their GPU instance,
//! MIG disabled only with nothing made); the remaining capacity is exact (a profile with
//! capacity left can be made without a placement, one without cannot); the MIG devices are the
//! compute instances; the partition written as the state file reads back equal. Any bytes as a
//! state file: parse never panics, and what it accepts formats to a text that parses equal.

#![no_main]

use libfuzzer_sys::fuzz_target;
use node_layout::mig_state::{self, Gpu, Mode, Placement};
use nvml_profile::{GpuInstanceProfile, GpuInstanceProfiles, Profile};

#[allow(dead_code, clippy::all)]
#[path = "../../crates/mock-nvml/src/abi.rs"]
mod abi;
#[allow(dead_code, clippy::all)]
#[path = "../../crates/mock-nvml/src/partition.rs"]
mod partition;

/// The shipped profiles whose GPUs have a MIG table, parsed once.
fn tables() -> &'static [Vec<GpuInstanceProfile>] {
    static TABLES: std::sync::OnceLock<Vec<Vec<GpuInstanceProfile>>> = std::sync::OnceLock::new();
    TABLES.get_or_init(|| {
        [nvml_profile::H100, nvml_profile::GB200]
            .into_iter()
            .map(|text| {
                let device = Profile::parse(text)
                    .expect("a shipped profile")
                    .devices()
                    .remove(0);
                match device.gpu_instance_profiles {
                    Some(GpuInstanceProfiles::Known(rows)) => rows,
                    other => panic!("a shipped MIG table: {other:?}"),
                }
            })
            .collect()
    })
}

fn check(gpu: &Gpu, table: &[GpuInstanceProfile]) {
    let mut used = std::collections::BTreeSet::new();
    let mut compute = 0;
    for (index, gi) in gpu.instances.iter().enumerate() {
        let row = partition::row(table, gi.profile_id).expect("a made instance has a row");
        let offered = row
            .placements
            .as_ref()
            .expect("a made profile has placements");
        assert!(
            offered
                .pairs()
                .any(|(start, size)| gi.placement == Placement { start, size }),
            "{gi:?} sits where its profile offers nothing"
        );
        for slice in gi.placement.start..gi.placement.start + gi.placement.size {
            assert!(used.insert(slice), "slice {slice} taken twice: {gpu:?}");
        }
        compute += row.slices;
        let same = gpu
            .instances
            .iter()
            .filter(|it| it.profile_id == gi.profile_id)
            .count();
        assert!(
            same <= row.instances as usize,
            "too many of {}: {gpu:?}",
            gi.profile_id
        );
        assert!(
            gpu.instances[..index].iter().all(|it| it.id != gi.id),
            "GPU instance id {} twice",
            gi.id
        );
        for (at, ci) in gi.compute.iter().enumerate() {
            assert!(
                gi.compute[..at].iter().all(|it| it.id != ci.id),
                "CI id {} twice",
                ci.id
            );
        }
    }
    assert!(
        compute <= partition::COMPUTE_SLICES,
        "{compute} compute slices: {gpu:?}"
    );
    if gpu.current == Mode::Disabled {
        assert!(gpu.instances.is_empty(), "MIG off with instances: {gpu:?}");
    }
    let devices = partition::mig_devices(gpu);
    let cis: usize = gpu.instances.iter().map(|gi| gi.compute.len()).sum();
    assert_eq!(devices.len(), cis);
    for row in table {
        if let Ok(left) = partition::remaining_gpu_instances(gpu, table, row.id) {
            let made = partition::create_gpu_instance(&mut gpu.clone(), table, row.id, None);
            assert_eq!(
                left > 0,
                made.is_ok(),
                "capacity {left} of {} but {made:?}",
                row.id
            );
        }
    }
    let state = mig_state::MigState {
        gpus: vec![gpu.clone()],
    };
    let text = mig_state::format(&state);
    assert_eq!(mig_state::parse(&text).as_ref(), Ok(&state), "{text}");
}

fuzz_target!(|data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        if let Ok(state) = mig_state::parse(text) {
            let again = mig_state::format(&state);
            assert_eq!(mig_state::parse(&again).as_ref(), Ok(&state), "{again}");
        }
    }
    let Some((&which, ops)) = data.split_first() else {
        return;
    };
    let tables = tables();
    let table = &tables[usize::from(which) % tables.len()];
    let mut gpu = Gpu {
        gpu: 0,
        current: Mode::Disabled,
        pending: Mode::Disabled,
        instances: Vec::new(),
    };
    for op in ops.chunks(3) {
        let [kind, a, b] = [op[0], *op.get(1).unwrap_or(&0), *op.get(2).unwrap_or(&0)];
        let row = &table[usize::from(a) % table.len()];
        match kind % 6 {
            0 => {
                let mode = if b % 2 == 0 {
                    Mode::Enabled
                } else {
                    Mode::Disabled
                };
                let _ = partition::set_mode(&mut gpu, mode);
            }
            1 => {
                let _ = partition::create_gpu_instance(&mut gpu, table, row.id, None);
            }
            2 => {
                let placement = row
                    .placements
                    .as_ref()
                    .and_then(|offered| offered.pairs().nth(usize::from(b)))
                    .map(|(start, size)| Placement { start, size })
                    .unwrap_or(Placement {
                        start: u32::from(b),
                        size: 1,
                    });
                let _ = partition::create_gpu_instance(&mut gpu, table, row.id, Some(placement));
            }
            3 => {
                let _ = partition::destroy_gpu_instance(&mut gpu, u32::from(b % 10));
            }
            4 => {
                let gi = u32::from(b % 10);
                if let Some(made) = gpu
                    .instance(gi)
                    .and_then(|it| partition::row(table, it.profile_id))
                {
                    if let Ok(offered) = partition::compute_profile(made) {
                        let _ = partition::create_compute_instance(
                            &mut gpu, gi, table, offered.id, None,
                        );
                    }
                }
                let _ = partition::create_compute_instance(
                    &mut gpu,
                    gi,
                    table,
                    u32::from(a % 10),
                    None,
                );
            }
            _ => {
                let _ = partition::destroy_compute_instance(
                    &mut gpu,
                    u32::from(b % 10),
                    u32::from(a % 10),
                );
            }
        }
        check(&gpu, table);
    }
});
