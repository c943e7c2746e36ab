//! `nvml-mock-stager inject` as a binary on a temporary staged root (no root needed): an
//! injection appended with a fresh id, `--clear` empties the file, and bad input fails with a
//! message naming the problem and leaves the file as it was.

use std::{fs, path::Path, process::Command};

use node_layout::{paths::Layout, xid};

const STAGER: &str = env!("CARGO_BIN_EXE_nvml-mock-stager");

fn inject(root: &Path, args: &[&str]) -> (bool, String, String) {
    let output = Command::new(STAGER)
        .arg("inject")
        .arg("--overlay-dir")
        .arg(root)
        .args(args)
        .output()
        .unwrap_or_else(|err| panic!("cannot run {STAGER}: {err}"));
    (
        output.status.success(),
        String::from_utf8_lossy(&output.stdout).into_owned(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

fn staged_root() -> (tempfile::TempDir, Layout) {
    let dir = tempfile::tempdir().unwrap_or_else(|err| panic!("temp dir: {err}"));
    let layout = Layout::new(dir.path().to_path_buf());
    fs::create_dir_all(layout.config_dir()).unwrap_or_else(|err| panic!("config dir: {err}"));
    let profile = nvml_profile::Profile::parse(nvml_profile::GB200)
        .and_then(|profile| profile.with_num_devices(2))
        .map(|profile| nvml_profile::staged::encode(&profile))
        .unwrap_or_else(|err| panic!("profile: {err}"));
    fs::write(layout.config(), profile).unwrap_or_else(|err| panic!("profile: {err}"));
    (dir, layout)
}

fn injections(layout: &Layout) -> Vec<xid::Injection> {
    let text = fs::read_to_string(layout.xid_injections()).unwrap_or_default();
    let (injections, errors) = xid::parse(&text);
    assert_eq!(errors, vec![], "{text}");
    injections
}

#[test]
fn injections_are_appended_and_cleared() {
    let (dir, layout) = staged_root();
    let (ok, stdout, stderr) = inject(dir.path(), &["--gpu", "1", "--xid", "79"]);
    assert!(ok, "{stderr}");
    assert!(stdout.starts_with("injected Xid 79 on GPU 1"), "{stdout}");
    let (ok, _, stderr) = inject(dir.path(), &["--gpu", "0", "--xid", "48"]);
    assert!(ok, "{stderr}");
    let (ok, stdout, stderr) = inject(dir.path(), &["--gpu", "1", "--ecc", "single"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.starts_with("injected a single-bit ECC error on GPU 1"),
        "{stdout}"
    );
    let found = injections(&layout);
    assert_eq!(
        found
            .iter()
            .map(|it| (it.gpu, it.fault))
            .collect::<Vec<_>>(),
        vec![
            (1, xid::Fault::Xid(79)),
            (0, xid::Fault::Xid(48)),
            (1, xid::Fault::Ecc(xid::Ecc::Single))
        ]
    );
    assert!(found[1].id > found[0].id);

    let (ok, stdout, stderr) = inject(dir.path(), &["--clear"]);
    assert!(ok, "{stderr}");
    assert!(
        stdout.starts_with("cleared every fault injection"),
        "{stdout}"
    );
    assert_eq!(
        fs::read_to_string(layout.xid_injections()).ok().as_deref(),
        Some("")
    );
    let (ok, _, stderr) = inject(dir.path(), &["--gpu", "1", "--xid", "79"]);
    assert!(ok, "{stderr}");
    let after = injections(&layout);
    assert!(after[0].id > found[1].id, "ids stay unique across a clear");
}

#[test]
fn bad_input_fails_naming_the_problem() {
    let (dir, layout) = staged_root();
    let cases: [(&[&str], &str); 5] = [
        (
            &["--gpu", "2", "--xid", "79"],
            "GPU 2 is out of range: the staged profile has 2 GPU(s) (0..=1)",
        ),
        (
            &["--gpu", "1", "--xid", "seventy-nine"],
            "invalid value 'seventy-nine' for '--xid <XID>'",
        ),
        (&["--gpu", "1"], "--xid <XID>"),
        (
            &["--gpu", "1", "--ecc", "triple"],
            "`triple` is not an ECC error kind: use `single` (corrected) or `double` (uncorrected)",
        ),
        (
            &["--clear", "--gpu", "1", "--xid", "79"],
            "cannot be used with",
        ),
    ];
    for (args, expected) in cases {
        let (ok, _, stderr) = inject(dir.path(), args);
        assert!(!ok, "{args:?} must fail");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
    }
    assert!(!layout.xid_injections().exists(), "nothing written");

    let unstaged = tempfile::tempdir().unwrap_or_else(|err| panic!("temp dir: {err}"));
    let (ok, _, stderr) = inject(unstaged.path(), &["--clear"]);
    assert!(!ok);
    assert!(stderr.contains("no staged profile at"), "{stderr}");
}
