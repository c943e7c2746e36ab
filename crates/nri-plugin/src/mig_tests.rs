use node_layout::mig_state::{ComputeInstance, Gpu, GpuInstance, Placement};

use super::*;

const UUIDS: [&str; 2] = [
    "GPU-b200b200-0000-0000-0000-000000000000",
    "GPU-b200b200-0000-0000-0000-000000000001",
];

fn parent(index: u32) -> Option<Parent<'static>> {
    let uuid = UUIDS.get(usize::try_from(index).ok()?)?;
    // Minors need not equal indices: the capability names use the minor.
    Some(Parent {
        uuid,
        minor: index + 10,
    })
}

fn instance(id: u32, start: u32, cis: &[u32]) -> GpuInstance {
    GpuInstance {
        id,
        profile_id: 19,
        placement: Placement { start, size: 1 },
        compute: cis
            .iter()
            .map(|&ci| ComputeInstance {
                id: ci,
                profile_id: 0,
                placement: Placement { start: ci, size: 1 },
            })
            .collect(),
    }
}

/// GPU 0: MIG disabled (an instance left over must not count); GPU 1: enabled, GI 1 with CI 0,
/// GI 2 with CIs 0 and 1.
fn view() -> MigView {
    let gpu = |gpu, current, instances| Gpu {
        gpu,
        current,
        pending: current,
        instances,
    };
    MigView {
        state: MigState {
            gpus: vec![
                gpu(0, Mode::Disabled, vec![instance(1, 0, &[0])]),
                gpu(
                    1,
                    Mode::Enabled,
                    vec![instance(1, 0, &[0]), instance(2, 1, &[0, 1])],
                ),
            ],
        },
        minors: mig_minors::parse(&mig_minors::format(&[10, 11])),
    }
}

fn grant(gpu_minor: u32, gi: u32, ci: u32) -> MigGrant {
    MigGrant {
        gpu_minor,
        caps: mig_minors::device_minors(gpu_minor, gi, ci).expect("in the table"),
    }
}

#[test]
fn mig_ids_parse_as_nvidia_writes_them() {
    assert_eq!(
        MigId::parse("MIG-1234"),
        Some(MigId::Uuid("MIG-1234".to_owned()))
    );
    assert_eq!(
        MigId::parse("mig-abcd"),
        Some(MigId::Uuid("mig-abcd".to_owned()))
    );
    assert_eq!(
        MigId::parse("1:2:0"),
        Some(MigId::Indices {
            gpu: 1,
            gi: 2,
            ci: 0
        })
    );
    for other in [
        "MIG-", "0:1", "0:1:2:3", "0::1", "a:1:2", "1:+2:0", "0", "GPU-1",
    ] {
        assert_eq!(MigId::parse(other), None, "{other}");
    }
    assert_eq!(
        MigId::parse("1:2:0").map(|id| id.to_string()).as_deref(),
        Some("1:2:0")
    );
}

#[test]
fn indices_resolve_to_the_parent_and_both_capabilities() {
    let id = MigId::parse("1:2:1").expect("id");
    assert_eq!(resolve(&id, parent, &view()), Ok(grant(11, 2, 1)));
    // gpu11/gi2/access 3 + 11·135 + 18 = 1506, its ci1 1508.
    assert_eq!(grant(11, 2, 1).caps, [1506, 1508]);
}

#[test]
fn uuids_resolve_through_the_partition() {
    let view = view();
    let gi = &view.state.gpus[1].instances[1];
    let uuid = mig_state::mig_uuid(UUIDS[1], gi, 0);
    assert_eq!(
        resolve(&MigId::Uuid(uuid.to_lowercase()), parent, &view),
        Ok(grant(11, 2, 0))
    );
    let on_gpu0 = mig_state::mig_uuid(UUIDS[0], &view.state.gpus[0].instances[0], 0);
    assert!(resolve(&MigId::Uuid(on_gpu0), parent, &view).is_err());
}

#[test]
fn unknown_devices_disabled_gpus_and_missing_tables_are_warnings() {
    let view = view();
    for text in [
        "1:3:0",
        "1:1:1",
        "0:1:0",
        "5:1:0",
        "MIG-ffffffff-0000-0000-0000-000000000000",
    ] {
        let id = MigId::parse(text).expect("id");
        assert_eq!(
            resolve(&id, parent, &view),
            Err(format!(
                "MIG device {text} is not in the node's MIG partition; not injected"
            ))
        );
    }
    let bare = MigView {
        minors: BTreeMap::new(),
        ..view
    };
    assert_eq!(
        resolve(&MigId::parse("1:1:0").expect("id"), parent, &bare),
        Err(
            "MIG device 1:1:0: its capabilities are not in the staged mig-minors; not injected"
                .to_owned()
        )
    );
}
