//! The pure parts of [`super`]: registration, delivery bookkeeping, the wait's timing (with a
//! scripted clock), reading the control file, and the registry.

use std::{cell::Cell, path::Path};

use super::*;

fn injection(id: u64, gpu: u32, xid: u64) -> xid::Injection {
    xid::Injection { id, gpu, xid }
}

fn xid_event(gpu: usize, data: u64) -> Option<Event> {
    Some(Event {
        gpu,
        event_type: abi::EVENT_TYPE_XID_CRITICAL_ERROR,
        data,
    })
}

#[test]
fn registration_accepts_xid_only() {
    let mut set = EventSet::default();
    assert_eq!(
        set.register(0, 0x4),
        Err(abi::ERROR_NOT_SUPPORTED),
        "PState"
    );
    assert_eq!(
        set.register(0, 0x8 | 0x1),
        Err(abi::ERROR_NOT_SUPPORTED),
        "Xid with single-bit ECC registers nothing"
    );
    assert_eq!(set.register(0, 1 << 40), Err(abi::ERROR_INVALID_ARGUMENT));
    assert!(set.registered.is_empty());
    assert_eq!(set.register(1, SUPPORTED), Ok(()));
    assert_eq!(set.register(1, 0), Ok(()));
    assert_eq!(
        set.registered,
        vec![(1, SUPPORTED)],
        "one entry per GPU, types or-ed"
    );
}

#[test]
fn each_injection_is_delivered_once_to_registered_gpus_only() {
    let mut set = EventSet::default();
    set.register(1, SUPPORTED).unwrap();
    let file = [
        injection(10, 0, 48),
        injection(11, 1, 79),
        injection(12, 1, 13),
    ];
    assert_eq!(set.next(&file), xid_event(1, 79));
    assert_eq!(set.next(&file), xid_event(1, 13));
    assert_eq!(set.next(&file), None, "GPU 0 is not registered");
    assert_eq!(set.next(&file), None, "nothing twice");

    // Another set gets the same injections once too.
    let mut other = EventSet::default();
    other.register(0, SUPPORTED).unwrap();
    other.register(1, SUPPORTED).unwrap();
    let delivered: Vec<u64> = std::iter::from_fn(|| other.next(&file))
        .map(|event| event.data)
        .collect();
    assert_eq!(delivered, vec![48, 79, 13]);
}

#[test]
fn a_cleared_file_forgets_and_a_new_line_is_a_new_event() {
    let mut set = EventSet::default();
    set.register(1, SUPPORTED).unwrap();
    assert_eq!(set.next(&[injection(5, 1, 79)]), xid_event(1, 79));
    assert_eq!(set.next(&[]), None, "cleared");
    assert!(set.delivered.is_empty());
    assert_eq!(set.next(&[injection(6, 1, 79)]), xid_event(1, 79));
    assert_eq!(set.next(&[injection(6, 1, 79)]), None);
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
    assert_eq!(
        with_set(first, |set| set.register(0, SUPPORTED)),
        Ok(Ok(()))
    );
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
