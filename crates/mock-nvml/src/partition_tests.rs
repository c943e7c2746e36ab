//! The MIG lifecycle over h100's table (8 memory slices, 7 compute slices).

use node_layout::mig_state::{Gpu, Mode, Placement};
use nvml_profile::{GpuInstanceProfile, GpuInstanceProfiles, Profile, H100};

use super::*;

fn table() -> Vec<GpuInstanceProfile> {
    let device = Profile::parse(H100).unwrap().devices().remove(0);
    match device.gpu_instance_profiles {
        Some(GpuInstanceProfiles::Known(rows)) => rows,
        other => panic!("h100 has a table, got {other:?}"),
    }
}

fn gpu(current: Mode) -> Gpu {
    Gpu {
        gpu: 0,
        current,
        pending: current,
        instances: Vec::new(),
    }
}

fn at(start: u32, size: u32) -> Option<Placement> {
    Some(Placement { start, size })
}

#[test]
fn nothing_is_made_while_mig_is_disabled() {
    let table = table();
    let mut off = gpu(Mode::Disabled);
    assert_eq!(
        create_gpu_instance(&mut off, &table, 19, None),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    assert_eq!(
        remaining_gpu_instances(&off, &table, 19),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    assert!(off.instances.is_empty());
}

#[test]
fn set_mode_activates_unless_instances_are_left() {
    let table = table();
    let mut state = gpu(Mode::Disabled);
    assert_eq!(set_mode(&mut state, Mode::Enabled), abi::SUCCESS);
    assert_eq!(
        (state.current, state.pending),
        (Mode::Enabled, Mode::Enabled)
    );
    create_gpu_instance(&mut state, &table, 0, None).unwrap();
    assert_eq!(set_mode(&mut state, Mode::Disabled), abi::ERROR_IN_USE);
    assert_eq!(
        (state.current, state.pending),
        (Mode::Enabled, Mode::Disabled)
    );
    destroy_gpu_instance(&mut state, 1).unwrap();
    assert_eq!(set_mode(&mut state, Mode::Disabled), abi::SUCCESS);
    assert_eq!(state.current, Mode::Disabled);
}

#[test]
fn without_a_placement_the_largest_first_order_of_mig_parted_fits_all_balanced() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    for profile in [9, 14, 19, 19] {
        create_gpu_instance(&mut state, &table, profile, None).unwrap();
    }
    let placed: Vec<(u32, u32, u32)> = state
        .instances
        .iter()
        .map(|gi| (gi.profile_id, gi.placement.start, gi.placement.size))
        .collect();
    assert_eq!(placed, [(9, 4, 4), (14, 0, 2), (19, 2, 1), (19, 3, 1)]);
}

#[test]
fn seven_1g_instances_fill_the_gpu_and_capacity_falls() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    for made in 0..7 {
        assert_eq!(remaining_gpu_instances(&state, &table, 19), Ok(7 - made));
        let id = create_gpu_instance(&mut state, &table, 19, None).unwrap();
        assert_eq!(id, made + 1, "the lowest free id");
        assert_eq!(state.instance(id).unwrap().placement.size, 1);
    }
    let mut starts: Vec<u32> = state
        .instances
        .iter()
        .map(|gi| gi.placement.start)
        .collect();
    starts.sort_unstable();
    assert_eq!(
        starts,
        (0..7).collect::<Vec<_>>(),
        "every 1g start taken once"
    );
    assert_eq!(remaining_gpu_instances(&state, &table, 19), Ok(0));
    assert_eq!(
        create_gpu_instance(&mut state, &table, 19, None),
        Err(abi::ERROR_INSUFFICIENT_RESOURCES)
    );
    assert_eq!(remaining_gpu_instances(&state, &table, 0), Ok(0));
    destroy_gpu_instance(&mut state, 3).unwrap();
    assert_eq!(remaining_gpu_instances(&state, &table, 19), Ok(1));
    assert_eq!(
        create_gpu_instance(&mut state, &table, 19, None),
        Ok(3),
        "id reused"
    );
}

#[test]
fn placements_must_be_offered_and_free() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    // 3g.40gb (id 9) is offered at 0:4 and 4:4.
    assert_eq!(
        create_gpu_instance(&mut state, &table, 9, at(2, 4)),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(create_gpu_instance(&mut state, &table, 9, at(4, 4)), Ok(1));
    // 2g.20gb (id 14) at 4:2 overlaps it.
    assert_eq!(
        create_gpu_instance(&mut state, &table, 14, at(4, 2)),
        Err(abi::ERROR_INSUFFICIENT_RESOURCES)
    );
    assert_eq!(create_gpu_instance(&mut state, &table, 14, at(2, 2)), Ok(2));
    assert_eq!(
        remaining_gpu_instances(&state, &table, 14),
        Ok(1),
        "0:2 left"
    );
    assert_eq!(remaining_gpu_instances(&state, &table, 0), Ok(0));
    assert_eq!(
        create_gpu_instance(&mut state, &table, 1, None),
        Err(abi::ERROR_INVALID_ARGUMENT),
        "no such profile id"
    );
    assert_eq!(
        remaining_gpu_instances(&state, &table, 1),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
}

#[test]
fn a_profile_limited_to_one_instance_stops_at_one() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    // 1g.10gb+me (id 20): one per GPU although seven slices are free.
    assert_eq!(create_gpu_instance(&mut state, &table, 20, None), Ok(1));
    assert_eq!(remaining_gpu_instances(&state, &table, 20), Ok(0));
    assert_eq!(
        create_gpu_instance(&mut state, &table, 20, at(3, 1)),
        Err(abi::ERROR_INSUFFICIENT_RESOURCES)
    );
    assert_eq!(remaining_gpu_instances(&state, &table, 19), Ok(6));
}

#[test]
fn compute_slices_bound_what_memory_slices_allow() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    // 4g (4 compute slices at 0:4) and 3g (3 at 4:4) fill the 7 compute slices.
    create_gpu_instance(&mut state, &table, 5, None).unwrap();
    create_gpu_instance(&mut state, &table, 9, None).unwrap();
    assert_eq!(remaining_gpu_instances(&state, &table, 19), Ok(0));
}

#[test]
fn compute_instances_take_the_whole_gpu_instance() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    let gi = create_gpu_instance(&mut state, &table, 9, None).unwrap();
    let row = row(&table, 9).unwrap();
    let offered = compute_profile_info(row, 2, 0).unwrap();
    assert_eq!((offered.id, offered.slices, offered.instances), (2, 3, 1));
    assert_eq!(offered.multiprocessors, 60);
    assert_eq!(
        compute_profile_info(row, 0, 0),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    assert_eq!(
        compute_profile_info(row, 9, 0),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(
        compute_profile_info(row, 2, 1),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(
        create_compute_instance(&mut state, gi, &table, 0, None),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    assert_eq!(
        create_compute_instance(&mut state, gi, &table, 2, at(1, 2)),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(remaining_compute_instances(&state, gi, &table, 2), Ok(1));
    assert_eq!(
        create_compute_instance(&mut state, gi, &table, 2, at(0, 3)),
        Ok(0)
    );
    assert_eq!(remaining_compute_instances(&state, gi, &table, 2), Ok(0));
    assert_eq!(
        create_compute_instance(&mut state, gi, &table, 2, None),
        Err(abi::ERROR_INSUFFICIENT_RESOURCES)
    );
    assert_eq!(destroy_gpu_instance(&mut state, gi), Err(abi::ERROR_IN_USE));
    assert_eq!(
        destroy_compute_instance(&mut state, gi, 1),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    destroy_compute_instance(&mut state, gi, 0).unwrap();
    destroy_gpu_instance(&mut state, gi).unwrap();
    assert_eq!(
        destroy_gpu_instance(&mut state, gi),
        Err(abi::ERROR_INVALID_ARGUMENT),
        "stale"
    );
    assert_eq!(
        create_compute_instance(&mut state, gi, &table, 2, None),
        Err(abi::ERROR_INVALID_ARGUMENT),
        "stale"
    );
}

#[test]
fn mig_devices_are_numbered_by_gpu_then_compute_instance() {
    let table = table();
    let mut state = gpu(Mode::Enabled);
    for _ in 0..3 {
        create_gpu_instance(&mut state, &table, 19, None).unwrap();
    }
    create_compute_instance(&mut state, 3, &table, 0, None).unwrap();
    create_compute_instance(&mut state, 1, &table, 0, None).unwrap();
    assert_eq!(mig_devices(&state), vec![(1, 0), (3, 0)]);
}

#[test]
fn every_shipped_row_offers_a_compute_profile() {
    for row in table() {
        let offered = compute_profile(&row).unwrap();
        assert_eq!(
            offered.multiprocessors, row.multiprocessors,
            "{:?}",
            row.name
        );
    }
}
