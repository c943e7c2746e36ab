use nvml_profile::{Profile, GB200, H100};

use super::*;

fn devices(text: &str) -> Vec<Device> {
    Profile::parse(text).unwrap().devices()
}

fn topology(text: &str) -> PcieTopology {
    Profile::parse(text).unwrap().pcie_topology().unwrap()
}

#[test]
fn masks_put_bit_n_in_word_n_over_64_and_drop_what_does_not_fit() {
    assert_eq!(mask(&[(0, 3)], 1), vec![0xF]);
    assert_eq!(mask(&[(63, 64)], 2), vec![1 << 63, 1]);
    assert_eq!(mask(&[(0, 71)], 2), vec![u64::MAX, 0xFF]);
    assert_eq!(
        mask(&[(72, 143)], 3),
        vec![0, 0xFFFF_FFFF_FFFF_FF00, 0xFFFF]
    );
    assert_eq!(mask(&[(70, 80)], 1), vec![0]);
}

#[test]
fn affinity_follows_the_numa_node_of_each_gpu() {
    let pcie = topology(GB200);
    assert_eq!(
        cpu_affinity(Some(&pcie), 0, 2).unwrap(),
        vec![u64::MAX, 0xFF]
    );
    assert_eq!(
        cpu_affinity(Some(&pcie), 3, 3).unwrap(),
        vec![0, 0xFFFF_FFFF_FFFF_FF00, 0xFFFF]
    );
    assert_eq!(memory_affinity(Some(&pcie), 1, 1).unwrap(), vec![1]);
    assert_eq!(memory_affinity(Some(&pcie), 2, 1).unwrap(), vec![2]);
    assert_eq!(numa_node(Some(&pcie), 2), Ok(1));
    // H100: socket 0 is CPUs 0-55 and 112-167.
    let h100 = topology(H100);
    let words = cpu_affinity(Some(&h100), 0, 3).unwrap();
    assert_eq!(words[0], (1 << 56) - 1);
    assert_eq!(words[1], 0xFFFF_0000_0000_0000);
    assert_eq!(words[2], (1 << 40) - 1);
    assert_eq!(
        cpu_affinity(Some(&pcie), 0, 0),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(cpu_affinity(None, 0, 1), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(numa_node(None, 0), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(check_scope(1), Ok(()));
    assert_eq!(check_scope(2), Err(abi::ERROR_INVALID_ARGUMENT));
}

#[test]
fn pci_v1_and_ext_carry_the_same_identity() {
    let gpu = &devices(GB200)[2];
    let v3 = query::pci_info(gpu);
    let v1 = pci_info_v1(&v3);
    let legacy = query::bus_id_legacy(&gpu.pci_bus_id);
    assert_eq!(
        &v1.bus_id[..=legacy.len()],
        format!("{legacy}\0").as_bytes()
    );
    let bus = u32::from(gpu.pci_bus_id.bus);
    assert_eq!(
        (v1.domain, v1.bus, v1.pci_device_id),
        (gpu.pci_bus_id.domain, bus, gpu.pci.device_id)
    );
    let ext = pci_info_ext(gpu, cabi::PCI_INFO_EXT_V1).unwrap();
    assert_eq!((ext.base_class, ext.sub_class), (3, 2));
    assert_eq!(ext.bus_id, v3.bus_id);
    assert_eq!(ext.pci_sub_system_id, gpu.pci.subsystem_id);
    assert_eq!(
        pci_info_ext(gpu, 1),
        Err(abi::ERROR_ARGUMENT_VERSION_MISMATCH)
    );
}

#[test]
fn pcie_counters_codecs_and_c2c_come_from_the_profile() {
    let mut gpu = devices(GB200).remove(0);
    assert_eq!(pcie_throughput(&gpu, 0), Ok(0));
    assert_eq!(pcie_throughput(&gpu, 2), Err(abi::ERROR_INVALID_ARGUMENT));
    assert_eq!(pcie_replays(&gpu), Ok(0));
    assert_eq!(engine_utilization(&gpu, Engine::Ofa), Ok((0, 0)));
    assert_eq!(encoder_capacity(&gpu, 2), Ok(100));
    assert_eq!(encoder_capacity(&gpu, 3), Err(abi::ERROR_INVALID_ARGUMENT));
    assert_eq!(codec_sessions(&gpu), Ok(0));
    assert_eq!(c2c(&gpu).unwrap().is_c2c_enabled, 1);
    gpu.pcie_counters = None;
    gpu.codecs = None;
    gpu.c2c = None;
    assert_eq!(pcie_replays(&gpu), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(pcie_throughput(&gpu, 1), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(
        engine_utilization(&gpu, Engine::Encoder),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    assert_eq!(codec_sessions(&gpu), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(c2c(&gpu), Err(abi::ERROR_NOT_SUPPORTED));
    assert_eq!(c2c(&devices(H100)[0]), Err(abi::ERROR_NOT_SUPPORTED));
}

#[test]
fn p2p_is_ok_over_active_nvlinks_only() {
    let gb200 = devices(GB200);
    assert_eq!(p2p_status(&gb200[0], &gb200[3], 2), Ok(cabi::P2P_STATUS_OK));
    assert_eq!(p2p_status(&gb200[0], &gb200[0], 4), Ok(cabi::P2P_STATUS_OK));
    assert_eq!(
        p2p_status(&gb200[0], &gb200[1], 5),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    let mut down = gb200[1].clone();
    down.nvlink.active = 0;
    assert_eq!(
        p2p_status(&gb200[0], &down, 0),
        Ok(cabi::P2P_STATUS_NOT_SUPPORTED)
    );
    let mut nowhere = gb200[1].clone();
    nowhere.nvlink.switches.clear();
    assert_eq!(
        p2p_status(&gb200[0], &nowhere, 2),
        Ok(cabi::P2P_STATUS_NOT_SUPPORTED),
        "links to an unknown far end (b200)"
    );
    let mut no_atomics = gb200[1].clone();
    no_atomics.nvlink.capabilities = Some(vec![]);
    assert_eq!(
        p2p_status(&gb200[0], &no_atomics, 3),
        Ok(cabi::P2P_STATUS_NOT_SUPPORTED)
    );
    assert_eq!(
        p2p_status(&gb200[0], &no_atomics, 0),
        Ok(cabi::P2P_STATUS_OK)
    );
}

fn with_processes() -> Vec<Device> {
    use crate::ffi::test_profiles::{with_processes, TWO_PROCESSES};
    devices(&with_processes(GB200, 0, TWO_PROCESSES))
}

#[test]
fn processes_split_by_kind_and_sample_once_per_time_stamp() {
    let gpus = with_processes();
    let compute = running(&gpus[0], ProcessKind::Compute);
    assert_eq!(compute.len(), 1);
    assert_eq!((compute[0].pid, compute[0].used_gpu_memory), (41, 1 << 30));
    assert_eq!(compute[0].gpu_instance_id, cabi::NO_INSTANCE);
    assert_eq!(running(&gpus[0], ProcessKind::Graphics)[0].pid, 42);
    assert!(running(&gpus[1], ProcessKind::Compute).is_empty());
    let samples = utilization_samples(&gpus[0], 1_000, 999).unwrap();
    assert_eq!(samples.len(), 2);
    assert_eq!((samples[0].sm_util, samples[0].time_stamp), (90, 1_000));
    assert_eq!(samples[1].dec_util, 5);
    assert_eq!(
        utilization_samples(&gpus[0], 1_000, 1_000),
        Err(abi::ERROR_NOT_FOUND)
    );
    assert_eq!(
        utilization_samples(&gpus[1], 1_000, 0),
        Err(abi::ERROR_NOT_FOUND)
    );
    assert_eq!(process_name(&gpus, 42), Ok("Xorg"));
    assert_eq!(process_name(&gpus, 43), Err(abi::ERROR_NOT_FOUND));
    assert_eq!(fits(2, 1), Err(abi::ERROR_INSUFFICIENT_SIZE));
    assert_eq!(fits(0, 0), Ok(()));
}

#[test]
fn nvlink_counters_accrue_with_uptime_on_active_links() {
    let mut gpu = devices(GB200).remove(0);
    assert_eq!(accrue(2656, 10.5), 27_888);
    assert_eq!(accrue(5, -1.0), 0);
    let rate = gpu.nvlink_counters.unwrap().traffic_per_second;
    assert_eq!(nvlink_traffic(&gpu, 17, 0, 2.0), Ok((2 * rate, 2 * rate)));
    assert_eq!(
        nvlink_traffic(&gpu, 17, 2, 2.0),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(
        nvlink_traffic(&gpu, 18, 0, 2.0),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert_eq!(nvlink_errors(&gpu, 0, 4, 2.0), Ok(0));
    assert_eq!(
        nvlink_errors(&gpu, 0, 5, 2.0),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    gpu.nvlink.active = 1;
    assert_eq!(
        nvlink_traffic(&gpu, 1, 0, 2.0),
        Ok((0, 0)),
        "a link that is down"
    );
    gpu.nvlink_counters = None;
    assert_eq!(
        nvlink_traffic(&gpu, 0, 0, 2.0),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    assert_eq!(
        nvlink_counter_control(&gpu, 0, None),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
    let t4_like = {
        let mut gpu = gpu.clone();
        gpu.nvlink.links = 0;
        gpu
    };
    assert_eq!(
        nvlink_errors(&t4_like, 0, 0, 1.0),
        Err(abi::ERROR_NOT_SUPPORTED)
    );
}

#[test]
fn resets_and_freezes_shift_what_the_caller_sees() {
    let key = (0, 3, CounterSet::Traffic(0));
    let mut controls = CounterControls::default();
    assert_eq!(controls.seen(key, 100), 100);
    controls.reset(key, 100);
    assert_eq!(controls.seen(key, 150), 50);
    controls.freeze(key, 150, true);
    assert_eq!(controls.seen(key, 400), 50, "frozen");
    controls.freeze(key, 400, false);
    assert_eq!(controls.seen(key, 410), 60, "resumes where it stopped");
    controls.freeze(key, 410, true);
    controls.reset(key, 500);
    assert_eq!(
        controls.seen(key, 600),
        0,
        "a frozen counter resets to zero and stays"
    );
    let other = (0, 3, CounterSet::Errors);
    assert_eq!(controls.seen(other, 7), 7, "sets are independent");
}
