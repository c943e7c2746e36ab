//! The pure parts of [`super`]: registration, delivery bookkeeping, the wait's timing (with a
//! scripted clock), reading the control file, and the registry.

use std::{cell::Cell, path::Path};

use super::*;

fn injection(id: u64, gpu: u32, code: u64) -> xid::Injection {
    xid::Injection {
        id,
        gpu,
        fault: Fault::Xid(code),
    }
}

fn ecc(id: u64, gpu: u32, ecc: xid::Ecc) -> xid::Injection {
    xid::Injection {
        id,
        gpu,
        fault: Fault::Ecc(ecc),
    }
}

/// Everything this library can report, as a GPU with ECC on that is MIG-capable supports it.
const ALL: u64 = 0x1 | 0x2 | 0x8 | 0x100;
const XID: u64 = abi::EVENT_TYPE_XID_CRITICAL_ERROR;

fn register(set: &mut EventSet, gpu: usize, types: u64) -> Result<(), NvmlReturn> {
    set.register(gpu, (types, ALL), Vec::new)
}

fn event(gpu: usize, event_type: u64, data: u64) -> Result<Option<Event>, NvmlReturn> {
    Ok(Some(Event {
        gpu,
        event_type,
        data,
    }))
}

fn xid_event(gpu: usize, data: u64) -> Result<Option<Event>, NvmlReturn> {
    event(gpu, XID, data)
}

#[test]
fn registration_accepts_the_supported_types_only() {
    let mut set = EventSet::default();
    assert_eq!(
        set.register(0, (0x4, ALL), Vec::new),
        Err(abi::ERROR_NOT_SUPPORTED),
        "PState"
    );
    assert_eq!(
        set.register(0, (0x8 | 0x1, XID), Vec::new),
        Err(abi::ERROR_NOT_SUPPORTED),
        "Xid with single-bit ECC on a GPU with ECC off registers nothing"
    );
    assert_eq!(
        register(&mut set, 0, 1 << 40),
        Err(abi::ERROR_INVALID_ARGUMENT)
    );
    assert!(set.registered.is_empty());
    assert_eq!(register(&mut set, 1, XID), Ok(()));
    assert_eq!(register(&mut set, 1, 0x1 | 0x2), Ok(()));
    assert_eq!(register(&mut set, 1, 0), Ok(()));
    assert_eq!(
        set.registered,
        vec![(1, XID | 0x1 | 0x2)],
        "one entry per GPU, types or-ed"
    );
    assert!(!set.watches_mig());
}

#[test]
fn each_injection_is_delivered_once_to_registered_gpus_only() {
    let mut set = EventSet::default();
    register(&mut set, 1, XID).unwrap();
    let file = [
        injection(10, 0, 48),
        injection(11, 1, 31),
        injection(12, 1, 13),
    ];
    assert_eq!(set.next(&file, None), xid_event(1, 31));
    assert_eq!(set.next(&file, None), xid_event(1, 13));
    assert_eq!(set.next(&file, None), Ok(None), "GPU 0 is not registered");
    assert_eq!(set.next(&file, None), Ok(None), "nothing twice");

    // Another set gets the same injections once too.
    let mut other = EventSet::default();
    register(&mut other, 0, XID).unwrap();
    register(&mut other, 1, XID).unwrap();
    let delivered: Vec<u64> = std::iter::from_fn(|| other.next(&file, None).unwrap())
        .map(|event| event.data)
        .collect();
    assert_eq!(delivered, vec![48, 31, 13]);
}

#[test]
fn ecc_errors_reach_sets_registered_for_their_type() {
    let file = [
        ecc(1, 0, xid::Ecc::Single),
        ecc(2, 0, xid::Ecc::Double),
        injection(3, 0, 48),
    ];
    let mut xid_only = EventSet::default();
    register(&mut xid_only, 0, XID).unwrap();
    assert_eq!(xid_only.next(&file, None), xid_event(0, 48));
    assert_eq!(xid_only.next(&file, None), Ok(None));
    let mut double_only = EventSet::default();
    register(&mut double_only, 0, 0x2).unwrap();
    assert_eq!(double_only.next(&file, None), event(0, 0x2, 0));
    assert_eq!(double_only.next(&file, None), Ok(None));
    let mut all = EventSet::default();
    register(&mut all, 0, XID | 0x1 | 0x2).unwrap();
    let types: Vec<u64> = std::iter::from_fn(|| all.next(&file, None).unwrap())
        .map(|event| event.event_type)
        .collect();
    assert_eq!(types, vec![0x1, 0x2, XID], "file order");
}

#[test]
fn xid_79_is_delivered_then_the_gpu_is_lost_once() {
    let file = [injection(5, 1, 79), injection(6, 0, 79)];
    let mut set = EventSet::default();
    register(&mut set, 1, XID).unwrap();
    assert_eq!(set.next(&file, None), xid_event(1, 79), "the event first");
    assert_eq!(set.next(&file, None), Err(abi::ERROR_GPU_IS_LOST));
    assert_eq!(
        set.next(&file, None),
        Ok(None),
        "once: no spinning consumer"
    );
    // Registered for other types only: lost at once; GPU 0 is not registered.
    let mut ecc_only = EventSet::default();
    register(&mut ecc_only, 1, 0x2).unwrap();
    assert_eq!(ecc_only.next(&file, None), Err(abi::ERROR_GPU_IS_LOST));
    assert_eq!(ecc_only.next(&file, None), Ok(None));
    // A clear forgets; a new Xid 79 is a new loss.
    assert_eq!(set.next(&[], None), Ok(None));
    assert!(set.lost.is_empty());
    let again = [injection(7, 1, 79)];
    assert_eq!(set.next(&again, None), xid_event(1, 79));
    assert_eq!(set.next(&again, None), Err(abi::ERROR_GPU_IS_LOST));
}

#[test]
fn a_mig_partition_change_is_delivered_once_per_change() {
    use node_layout::mig_state::{Mode, Placement};
    let instance = |id| GpuInstance {
        id,
        profile_id: 9,
        placement: Placement { start: 0, size: 4 },
        compute: Vec::new(),
    };
    let mut state = MigState::default();
    let mut set = EventSet::default();
    set.register(1, (0x100, ALL), || partition(&state, 1))
        .unwrap();
    assert!(set.watches_mig());
    assert_eq!(set.next(&[], Some(&state)), Ok(None));
    state
        .gpu_mut(1, (Mode::Enabled, Mode::Enabled))
        .instances
        .push(instance(1));
    assert_eq!(set.next(&[], Some(&state)), event(1, 0x100, 0));
    assert_eq!(set.next(&[], Some(&state)), Ok(None));
    assert_eq!(
        set.next(&[], None),
        Ok(None),
        "no partition read: no change"
    );
    state
        .gpu_mut(0, (Mode::Enabled, Mode::Enabled))
        .instances
        .push(instance(1));
    assert_eq!(
        set.next(&[], Some(&state)),
        Ok(None),
        "GPU 0 is not watched"
    );
    state
        .gpu_mut(1, (Mode::Enabled, Mode::Enabled))
        .instances
        .clear();
    assert_eq!(set.next(&[], Some(&state)), event(1, 0x100, 0), "destroyed");
}

#[test]
fn a_cleared_file_forgets_and_a_new_line_is_a_new_event() {
    let mut set = EventSet::default();
    register(&mut set, 1, XID).unwrap();
    assert_eq!(set.next(&[injection(5, 1, 48)], None), xid_event(1, 48));
    assert_eq!(set.next(&[], None), Ok(None), "cleared");
    assert!(set.delivered.is_empty());
    assert_eq!(set.next(&[injection(6, 1, 48)], None), xid_event(1, 48));
    assert_eq!(set.next(&[injection(6, 1, 48)], None), Ok(None));
}

/// A clock that advances only when slept on, and counts the sleeps.
struct ScriptedClock {
    start: Instant,
    elapsed: Duration,
    sleeps: Vec<Duration>,
}

impl ScriptedClock {
    fn new() -> ScriptedClock {
        ScriptedClock {
            start: Instant::now(),
            elapsed: Duration::ZERO,
            sleeps: Vec::new(),
        }
    }
}

impl Clock for ScriptedClock {
    fn now(&self) -> Instant {
        self.start + self.elapsed
    }
    fn sleep(&mut self, duration: Duration) {
        self.elapsed += duration;
        self.sleeps.push(duration);
    }
}

#[test]
fn a_wait_with_nothing_sleeps_in_slices_until_the_timeout() {
    let mut clock = ScriptedClock::new();
    let polls = Cell::new(0);
    let found: Result<Option<()>, ()> = wait(Duration::from_millis(1_020), &mut clock, || {
        polls.set(polls.get() + 1);
        Ok(None)
    });
    assert_eq!(found, Ok(None));
    assert_eq!(clock.elapsed, Duration::from_millis(1_020));
    assert_eq!(
        clock.sleeps.len(),
        21,
        "20 slices of 50 ms, then the last 20 ms"
    );
    assert!(clock.sleeps[..20].iter().all(|sleep| *sleep == SLICE));
    assert_eq!(clock.sleeps[20], Duration::from_millis(20));
    assert_eq!(
        polls.get(),
        22,
        "polled before each sleep and once at the deadline"
    );
}

#[test]
fn a_wait_returns_what_arrives_and_errors_at_once() {
    let mut clock = ScriptedClock::new();
    let polls = Cell::new(0);
    let found: Result<Option<u32>, ()> = wait(Duration::from_secs(5), &mut clock, || {
        polls.set(polls.get() + 1);
        Ok((polls.get() == 4).then_some(79))
    });
    assert_eq!(found, Ok(Some(79)));
    assert_eq!(clock.elapsed, SLICE * 3);

    let mut clock = ScriptedClock::new();
    let failed: Result<Option<u32>, u32> = wait(Duration::from_secs(5), &mut clock, || Err(2));
    assert_eq!(failed, Err(2));
    assert!(clock.sleeps.is_empty());

    let mut clock = ScriptedClock::new();
    let zero: Result<Option<u32>, ()> = wait(Duration::ZERO, &mut clock, || Ok(None));
    assert_eq!(zero, Ok(None));
    assert!(
        clock.sleeps.is_empty(),
        "a zero timeout polls once and returns"
    );
}

#[test]
fn the_control_file_is_read_when_it_is_a_small_regular_file() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("xid-injections");
    assert_eq!(read_injections(None), Ok(vec![]));
    assert_eq!(
        read_injections(Some(&path)),
        Ok(vec![]),
        "missing: no fault"
    );
    std::fs::write(&path, "id=1 gpu=1 xid=79\nbad line\n").unwrap();
    assert_eq!(read_injections(Some(&path)), Ok(vec![injection(1, 1, 79)]));
    assert_eq!(read_injections(Some(dir.path())), Err(Unreadable::Skipped));
    assert_eq!(
        read_injections(Some(Path::new("/dev/zero"))),
        Err(Unreadable::Skipped)
    );
    let file = std::fs::File::create(&path).unwrap();
    file.set_len(xid::MAX_FILE_BYTES + 1).unwrap();
    assert_eq!(read_injections(Some(&path)), Err(Unreadable::Skipped));
}

#[test]
fn the_registry_issues_distinct_handles_and_forgets_freed_ones() {
    // The last nvmlShutdown of a concurrent test forgets every set.
    let _lock = crate::ENV_LOCK
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let first = create();
    let second = create();
    assert_ne!(first, second);
    assert!(first >= 4096 && second >= 4096);
    assert_eq!(with_set(first, |set| register(set, 0, XID)), Ok(Ok(())));
    assert_eq!(free(first), Ok(()));
    assert_eq!(free(first), Err(abi::ERROR_INVALID_ARGUMENT), "double free");
    assert_eq!(
        with_set(first, |_| ()),
        Err(abi::ERROR_INVALID_ARGUMENT),
        "freed"
    );
    assert_eq!(with_set(8, |_| ()), Err(abi::ERROR_INVALID_ARGUMENT));
    assert_eq!(free(second), Ok(()));
}
