//! The Nix flake, proven as far as a machine without nixpkgs allows.
//!
//! Real peer: Debian's `nix` (2.8) parses every `.nix` file and evaluates the
//! flake. nixpkgs itself cannot be fetched here, so the flake is evaluated with
//! its `nixpkgs` input overridden by `tests/nix/stub-nixpkgs`, a double that
//! offers only the attributes the flake uses and rejects unknown arguments.
//! The pure parts (`nix/lib.nix`: pins, image spec) need no nixpkgs and are
//! evaluated for real, then compared with what the Rust side reads from the
//! same files.

use std::path::{Path, PathBuf};
use std::process::Command;

use integration_tests::{
    assert_reads_long_name_and_hard_link, checked, imex_archive_long_name, permission_bits,
    repo_root, require_program, run_ok, IMEX_ARCHIVE_FILES, IMEX_ARCHIVE_HARD_LINK,
    IMEX_ARCHIVE_TOP,
};

const NIX_FEATURES: &str = "nix-command flakes";
const SYSTEMS: [&str; 2] = ["x86_64-linux", "aarch64-linux"];

fn nix() -> Command {
    require_program(
        "nix",
        "install Debian's nix-bin (`apt-get install nix-bin`)",
    );
    let mut cmd = Command::new("nix");
    cmd.args(["--extra-experimental-features", NIX_FEATURES]);
    cmd
}

fn stub() -> String {
    format!(
        "path:{}",
        repo_root().join("tests/nix/stub-nixpkgs").display()
    )
}

/// Runs nix in `flake_dir` with nixpkgs overridden by the stub; returns stdout
/// or the whole stderr as the error.
fn nix_with_stub(flake_dir: &Path, args: &[&str]) -> Result<String, String> {
    nix_with_stub_at(flake_dir, &stub(), args)
}

/// As [`nix_with_stub`], with the stub nixpkgs at the flake reference `stub`.
fn nix_with_stub_at(flake_dir: &Path, stub: &str, args: &[&str]) -> Result<String, String> {
    let out = nix()
        .current_dir(flake_dir)
        .args(args)
        .args(["--override-input", "nixpkgs", stub, "--no-write-lock-file"])
        .output()
        .map_err(|err| format!("cannot run nix: {err}"))?;
    if out.status.success() {
        Ok(String::from_utf8_lossy(&out.stdout).into_owned())
    } else {
        Err(String::from_utf8_lossy(&out.stderr).into_owned())
    }
}

fn eval_json(flake_dir: &Path, installable: &str, apply: &str) -> serde_json::Value {
    let out = nix_with_stub(
        flake_dir,
        &["eval", "--json", installable, "--apply", apply],
    )
    .unwrap_or_else(|err| panic!("nix eval {installable} failed against the stub:\n{err}"));
    serde_json::from_str(&out).expect("nix eval --json prints JSON")
}

/// Each attribute of `installable` (an attribute set) mapped through `value`, a Nix function
/// giving a string, as (name, string) pairs; a value that is not a string reads as "".
fn eval_strings(flake_dir: &Path, installable: &str, value: &str) -> Vec<(String, String)> {
    let set = eval_json(
        flake_dir,
        installable,
        &format!("set: builtins.mapAttrs (name: {value}) set"),
    );
    set.as_object()
        .expect("an attribute set")
        .iter()
        .map(|(name, it)| (name.clone(), it.as_str().unwrap_or_default().to_owned()))
        .collect()
}

/// The files git lists below `root` (tracked, and untracked but not ignored) that match
/// `pathspec` (every one when it is empty), as paths relative to `root`.
fn git_files(root: &Path, pathspec: &[&str]) -> Vec<String> {
    let listed = Command::new("git")
        .current_dir(root)
        .args([
            "ls-files",
            "-z",
            "--cached",
            "--others",
            "--exclude-standard",
        ])
        .args(pathspec)
        .output()
        .expect("git ls-files runs");
    listed
        .stdout
        .split(|it| *it == 0)
        .filter(|it| !it.is_empty())
        .map(|name| String::from_utf8_lossy(name).into_owned())
        .collect()
}

/// The flake as git sees it (tracked files only), copied into a plain
/// directory so a test can alter it without touching the work tree.
fn flake_copy() -> tempfile::TempDir {
    let root = repo_root();
    let dir = tempfile::tempdir().expect("temp dir");
    for name in git_files(&root, &[]) {
        let relative = PathBuf::from(name);
        let from = root.join(&relative);
        if !from.is_file() {
            continue;
        }
        let to = dir.path().join(&relative);
        std::fs::create_dir_all(to.parent().expect("a parent")).expect("mkdir");
        std::fs::copy(&from, &to).unwrap_or_else(|err| panic!("copy {}: {err}", from.display()));
    }
    dir
}

fn edit(dir: &Path, relative: &str, from: &str, to: &str) {
    let path = dir.join(relative);
    let text = std::fs::read_to_string(&path).expect("readable");
    assert!(
        text.contains(from),
        "{relative} no longer contains `{from}`: update this test"
    );
    std::fs::write(&path, text.replacen(from, to, 1)).expect("writable");
}

#[test]
fn every_nix_file_parses() {
    require_program(
        "nix-instantiate",
        "install Debian's nix-bin (`apt-get install nix-bin`)",
    );
    let root = repo_root();
    let files = git_files(&root, &["*.nix"]);
    assert!(
        files.len() >= 8,
        "expected the flake, nix/ and the stub, found {files:?}"
    );
    for file in &files {
        checked(
            Command::new("nix-instantiate")
                .current_dir(&root)
                .args(["--parse", file])
                .output(),
            &format!("nix-instantiate --parse {file} (does it parse?)"),
        );
    }
}

#[test]
#[ignore = "nixfmt cannot be installed on these machines (not in Debian bookworm, PyPI, npm or crates.io); run `nix fmt -- --check .` where nixpkgs can be fetched"]
fn every_nix_file_is_formatted() {
    require_program(
        "nixfmt",
        "use `nix fmt` (the flake's formatter is nixfmt, RFC style)",
    );
    checked(
        Command::new("nixfmt")
            .current_dir(repo_root())
            .args(["--check", "flake.nix", "nix", "tests/nix"])
            .output(),
        "nixfmt --check (not formatted?)",
    );
}

/// The flake's apps besides `default` (which is `demo`), in name order.
const APPS: [&str; 10] = [
    "demo",
    "doctor",
    "down",
    "scenario1",
    "scenario2",
    "scenario3",
    "scenario4",
    "scenario5",
    "status",
    "up",
];

#[test]
fn flake_shows_every_output_for_both_systems() {
    let out = nix_with_stub(&repo_root(), &["flake", "show", "--json"])
        .unwrap_or_else(|err| panic!("nix flake show failed against the stub:\n{err}"));
    let shown: serde_json::Value =
        serde_json::from_str(&out).expect("flake show --json prints JSON");
    for system in SYSTEMS {
        let names = |output: &str| -> Vec<String> {
            let mut names: Vec<String> = shown[output][system]
                .as_object()
                .unwrap_or_else(|| panic!("no {output}.{system} in {shown}"))
                .keys()
                .cloned()
                .collect();
            names.sort();
            names
        };
        assert_eq!(
            names("packages"),
            [
                "cdsim",
                "default",
                "mock-image",
                "nvidia-imex",
                "workload-image"
            ]
        );
        let mut apps = vec!["default"];
        apps.extend(APPS);
        assert_eq!(names("apps"), apps);
        assert_eq!(
            names("checks"),
            [
                "cargo-tests",
                "chart",
                "clippy",
                "image-contents",
                "manifests",
                "rustfmt"
            ]
        );
        assert_eq!(names("devShells"), ["default"]);
        assert!(
            shown["formatter"][system].is_object(),
            "no formatter for {system}"
        );
    }
}

#[test]
fn every_derivation_instantiates_against_the_stub() {
    let root = repo_root();
    for system in SYSTEMS {
        for output in ["packages", "checks", "devShells"] {
            let drvs = eval_strings(&root, &format!(".#{output}.{system}"), "drv: drv.drvPath");
            for (name, drv) in drvs {
                assert!(
                    drv.starts_with("/nix/store/") && drv.ends_with(".drv"),
                    "{output}.{system}.{name}: {drv}"
                );
            }
        }
        let programs = eval_strings(&root, &format!(".#apps.{system}"), "app: app.program");
        for (name, program) in programs {
            assert!(program.ends_with(&format!(
                "/bin/cdsim-{}",
                if name == "default" { "demo" } else { &name }
            )));
        }
    }
}

/// Each app's wrapper script, as writeShellApplication writes it (the stub
/// keeps the full text in the derivation).
fn wrapper_texts() -> serde_json::Value {
    let root = repo_root();
    let wrapper_drvs = eval_json(
        &root,
        ".#apps.x86_64-linux",
        "apps: builtins.mapAttrs (name: app: builtins.attrNames (builtins.getContext app.program)) apps",
    );
    let mut texts = serde_json::Map::new();
    for (app, drvs) in wrapper_drvs.as_object().expect("apps") {
        let drv = drvs[0]
            .as_str()
            .unwrap_or_else(|| panic!("app {app} has no wrapper derivation"));
        let out = run_ok(nix().args(["show-derivation", drv]));
        let shown: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
        texts.insert(app.clone(), shown[drv]["env"]["text"].clone());
    }
    serde_json::Value::Object(texts)
}

#[test]
fn apps_hand_nix_built_images_to_xtask() {
    let texts = wrapper_texts();
    for app in APPS {
        let text = texts[app].as_str().unwrap_or_default();
        assert!(
            text.contains(&format!("/bin/xtask {app} \"$@\"")),
            "{app} does not exec xtask {app}:\n{text}"
        );
        assert!(
            text.contains("export CDSIM_ROOT=/nix/store/"),
            "{app} does not point xtask at the flake source"
        );
        let path_line = text
            .lines()
            .find(|line| line.starts_with("export PATH="))
            .unwrap_or_else(|| panic!("{app} puts nothing on PATH:\n{text}"));
        for tool in ["kind", "kubernetes-helm", "kubectl", "jq", "docker-client"] {
            assert!(
                path_line.contains(&format!("-{tool}/bin")),
                "{app} lacks {tool} on PATH: {path_line}"
            );
        }
        let installs = matches!(app, "demo" | "up");
        assert_eq!(
            text.contains("--mock-image") && text.contains("--workload-image"),
            installs,
            "{app}:\n{text}"
        );
    }
    assert_eq!(
        texts["default"], texts["demo"],
        "the default app is the demo"
    );
}

/// `nix flake check` warns about an app without meta.description.
#[test]
fn every_app_has_a_description() {
    let descriptions = eval_strings(
        &repo_root(),
        ".#apps.x86_64-linux",
        "app: app.meta.description or \"\"",
    );
    for (app, description) in descriptions {
        assert!(description.len() > 10, "app {app} has no meta.description");
    }
}

/// `nix eval ATTR` against the stub after replacing `from` by `to` in `file` of a copy of the
/// flake must fail (`why`), with an error that contains every one of `says`.
fn assert_eval_fails_after_edit(
    file: &str,
    from: &str,
    to: &str,
    attr: &str,
    why: &str,
    says: &[&str],
) {
    let copy = flake_copy();
    edit(copy.path(), file, from, to);
    let err = nix_with_stub(copy.path(), &["eval", attr]).expect_err(why);
    assert!(
        says.iter().all(|text| err.contains(text)),
        "unexpected error:\n{err}"
    );
}

/// On a Nix older than nixpkgs' `lib/minver.nix`, the flake stops with one line naming both
/// versions before nixpkgs' lib is evaluated (here: a stub that asks for Nix 99.0).
#[test]
fn a_too_old_nix_is_named_in_one_line() {
    let copy = flake_copy();
    let minver = "tests/nix/stub-nixpkgs/lib/minver.nix";
    edit(copy.path(), minver, "\"2.3\"", "\"99.0\"");
    let stub = format!(
        "path:{}",
        copy.path().join("tests/nix/stub-nixpkgs").display()
    );
    let version = nix().arg("--version").output().expect("nix --version runs");
    let version = String::from_utf8_lossy(&version.stdout);
    let found = version
        .split_whitespace()
        .last()
        .expect("a version")
        .to_owned();
    let err = nix_with_stub_at(copy.path(), &stub, &["eval", ".#packages.x86_64-linux"])
        .expect_err("Nix is older than 99.0");
    let line =
        format!("cdsim's flake needs Nix >= 99.0 (nixpkgs' lib/minver.nix); this is Nix {found}");
    assert!(err.contains(&line), "no line `{line}` in:\n{err}");
    assert!(
        !err.contains("readFileType"),
        "nixpkgs' lib was evaluated before the check:\n{err}"
    );
}

/// pkgs/build-support/rust/build-rust-package/default.nix: without cargoLock
/// (or cargoHash, cargoDeps, cargoVendorDir) it throws this message.
#[test]
fn buildrustpackage_without_vendored_dependencies_is_refused() {
    assert_eval_fails_after_edit(
        "nix/packages.nix",
        "cargoLock.lockFile =",
        "cargoLocks.lockFile =",
        ".#packages.x86_64-linux.cdsim.drvPath",
        "without cargoLock the package must not evaluate",
        &["cargoHash, cargoVendorDir, cargoDeps, or cargoLock must be set"],
    );
}

/// pkgs/stdenv/generic/make-derivation.nix: mkDerivation (and so
/// buildRustPackage) takes any argument and puts it into the derivation, so
/// the flake's checkFlags and nativeCheckInputs reach the check phase.
#[test]
fn builder_arguments_pass_through_to_the_derivation() {
    let flags = eval_json(
        &repo_root(),
        ".#packages.x86_64-linux.cdsim",
        "d: { inherit (d) checkFlags cargoTestFlags; }",
    );
    let check_flags = flags["checkFlags"].to_string();
    assert!(
        check_flags.contains("\"--exact\"")
            && check_flags.contains("\"--skip=ldcache::tests::agrees_with_ldconfig\""),
        "{flags}"
    );
    let chart = eval_json(
        &repo_root(),
        ".#checks.x86_64-linux.chart",
        "d: map (p: p.pname) d.nativeCheckInputs",
    );
    assert_eq!(chart, serde_json::json!(["kubernetes-helm"]));
}

/// A misspelt package is a missing attribute, in nixpkgs as in the stub.
#[test]
fn a_misspelt_package_fails_evaluation() {
    assert_eval_fails_after_edit(
        "nix/default.nix",
        "pkgs.kubernetes-helm",
        "pkgs.kubernetes-helmm",
        ".#devShells.x86_64-linux.default.drvPath",
        "a misspelt package must fail evaluation",
        &["kubernetes-helmm"],
    );
}

/// pkgs/build-support/trivial-builders/default.nix: writeShellApplication's
/// argument set is closed, so a misspelt argument is an error there.
#[test]
fn write_shell_application_rejects_an_unknown_argument() {
    assert_eval_fails_after_edit(
        "nix/apps.nix",
        "runtimeInputs = tools;",
        "runtimeInput = tools;",
        ".#apps.x86_64-linux.doctor.program",
        "writeShellApplication has a closed argument set",
        &["unexpected argument 'runtimeInput'"],
    );
}

/// pkgs/stdenv/generic/check-meta.nix: the unfree refusal, with its message.
#[test]
fn unfree_is_allowed_for_nvidia_imex_only() {
    assert_eval_fails_after_edit(
        "nix/default.nix",
        "== \"nvidia-imex\"",
        "== \"something-else\"",
        ".#packages.x86_64-linux.nvidia-imex.drvPath",
        "without the predicate the unfree payload must be refused",
        &[
            "Refusing to evaluate package 'nvidia-imex-",
            "because it has an unfree license (‘unfree’)",
        ],
    );
}

/// Builds installables of a flake directory against the stub (placeholder
/// builds: the stub's builders write empty trees, never compile).
fn build_with_stub(flake_dir: &Path, installables: &[&str]) -> Result<String, String> {
    let mut args = vec!["build", "--no-link"];
    args.extend(installables);
    args.extend([
        "--option",
        "substituters",
        "",
        "--option",
        "sandbox",
        "false",
        "--option",
        "build-users-group",
        "",
    ]);
    nix_with_stub(flake_dir, &args)
}

/// pkgs/build-support/docker/default.nix: extraCommands run in the image's
/// root with the referenced packages present; the stub's packages are trees
/// of placeholders at the paths they really install (binaries from the
/// workspace manifests, the install phases' destinations). A payload path
/// the package does not install fails the image build.
#[test]
fn image_payload_paths_exist_in_the_packages() {
    build_with_stub(
        &repo_root(),
        &[
            ".#packages.x86_64-linux.mock-image",
            ".#packages.x86_64-linux.workload-image",
        ],
    )
    .unwrap_or_else(|err| panic!("the images' extraCommands fail against the packages:\n{err}"));

    let copy = flake_copy();
    edit(
        copy.path(),
        "nix/images.nix",
        "\"lib\" else \"bin\"",
        "\"lib64\" else \"bin\"",
    );
    let err = build_with_stub(copy.path(), &[".#packages.x86_64-linux.mock-image"])
        .expect_err("a payload path the package does not install must fail");
    assert!(
        err.contains("lib64/libnvidia_ml.so"),
        "unexpected error:\n{err}"
    );
}

/// lib/fileset: the package's source is only its build inputs, so a README
/// edit changes no derivation (no rebuild, no retag) and a crate edit does.
#[test]
fn only_build_inputs_are_in_the_source() {
    let drv = |dir: &Path| -> (String, String) {
        let out = nix_with_stub(
            dir,
            &[
                "eval",
                "--json",
                ".#packages.x86_64-linux",
                "--apply",
                "p: [ p.cdsim.drvPath p.mock-image.drvPath ]",
            ],
        )
        .unwrap_or_else(|err| panic!("eval failed:\n{err}"));
        let paths: Vec<String> = serde_json::from_str(&out).expect("JSON");
        (paths[0].clone(), paths[1].clone())
    };
    let before = drv(flake_copy().path());

    let copy = flake_copy();
    edit(copy.path(), "README.md", "# cdsim", "# cdsim (edited)");
    edit(
        copy.path(),
        "flake.nix",
        "description = \"cdsim",
        "description = \"edited cdsim",
    );
    assert_eq!(
        drv(copy.path()),
        before,
        "a README or flake edit must not rebuild"
    );

    let copy = flake_copy();
    edit(
        copy.path(),
        "crates/topology/src/lib.rs",
        "//!",
        "//! (edited)\n//!",
    );
    let after = drv(copy.path());
    assert_ne!(after.0, before.0, "a crate edit must rebuild the package");
    assert_ne!(after.1, before.1, "and retag the image");

    // The mock library's stubs are generated from a data file: it is a build input too.
    let copy = flake_copy();
    edit(
        copy.path(),
        "crates/mock-nvml/nvml-functions.txt",
        "# The NVML functions",
        "# (edited) The NVML functions",
    );
    let after = drv(copy.path());
    assert_ne!(
        after.0, before.0,
        "crates/mock-nvml/nvml-functions.txt must be in the package's source"
    );
}

#[test]
fn pins_evaluate_for_real_and_match_versions_toml() {
    let out = run_ok(nix().current_dir(repo_root()).args([
        "eval",
        "--json",
        "--file",
        "nix/lib.nix",
        "pins",
    ]));
    let from_nix: serde_json::Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let text = std::fs::read_to_string(repo_root().join("manifests/versions.toml"))
        .expect("versions.toml");
    let from_rust: toml::Value = toml::from_str(&text).expect("versions.toml parses");
    let from_rust = serde_json::to_value(from_rust).expect("toml converts to JSON");
    assert_eq!(
        from_nix, from_rust,
        "Nix and Rust read manifests/versions.toml differently"
    );
}

#[test]
fn flake_lock_pins_nixpkgs_exactly() {
    let lock: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(repo_root().join("flake.lock")).expect("flake.lock"),
    )
    .expect("flake.lock is JSON");
    assert_eq!(lock["version"], 7, "flake.lock format version");
    assert_eq!(lock["root"], "root");
    assert_eq!(
        lock["nodes"]["root"]["inputs"],
        serde_json::json!({ "nixpkgs": "nixpkgs" })
    );

    let text = std::fs::read_to_string(repo_root().join("manifests/versions.toml"))
        .expect("versions.toml");
    let pins: toml::Value = toml::from_str(&text).expect("versions.toml parses");
    let nix = &pins["nix"];
    let locked = &lock["nodes"]["nixpkgs"]["locked"];
    assert_eq!(locked["type"], "github");
    assert_eq!(
        locked["owner"],
        nix["nixpkgs_owner"].as_str().expect("owner")
    );
    assert_eq!(locked["repo"], nix["nixpkgs_repo"].as_str().expect("repo"));
    assert_eq!(locked["rev"], nix["nixpkgs_rev"].as_str().expect("rev"));
    assert_eq!(
        locked["narHash"],
        nix["nixpkgs_nar_hash"].as_str().expect("narHash")
    );
    assert_eq!(
        locked["lastModified"],
        nix["nixpkgs_last_modified"]
            .as_integer()
            .expect("lastModified")
    );
    assert_eq!(
        lock["nodes"]["nixpkgs"]["original"]["ref"],
        nix["nixpkgs_ref"].as_str().expect("ref")
    );

    // Where the reference notes sit beside the clone (developer machines and
    // CI), the pin must be the preferred one they record.
    let pins_md = repo_root().join("../shared/reference/pins.md");
    if let Ok(notes) = std::fs::read_to_string(&pins_md) {
        let preferred = notes
            .lines()
            .find(|line| line.contains("preferred"))
            .expect("a preferred pin row");
        for value in [&locked["rev"], &locked["narHash"], &locked["lastModified"]] {
            let value = value
                .as_str()
                .map(str::to_owned)
                .unwrap_or_else(|| value.to_string());
            assert!(
                preferred.contains(&value),
                "{value} is not the preferred pin in {}",
                pins_md.display()
            );
        }
    }
}

#[test]
fn readme_documents_the_nix_entry_points() {
    let readme = std::fs::read_to_string(repo_root().join("README.md")).expect("README.md");
    for needle in ["nix run .#demo", "nix flake check", "nix develop", "Docker"] {
        assert!(
            readme.contains(needle),
            "README.md does not mention `{needle}`"
        );
    }
    // README.md says whether there is a NixOS VM test, and checks.nix agrees.
    let checks = std::fs::read_to_string(repo_root().join("nix/checks.nix")).expect("checks.nix");
    let has_vm_test = checks.contains("runNixOSTest");
    assert_eq!(
        readme.contains("There is no NixOS VM test"),
        !has_vm_test,
        "README.md and nix/checks.nix disagree about the NixOS VM test"
    );
}

/// The plan `nix/lib.nix` derives from `manifests/images.toml`, evaluated for
/// real by nix.
fn nix_image_plan(imex: bool) -> serde_json::Value {
    let out = run_ok(
        nix()
            .current_dir(repo_root())
            .args([
                "eval",
                "--json",
                "--file",
                "nix/lib.nix",
                "imagePlan",
                "--apply",
            ])
            .arg(format!("plan: plan {{ imex = {imex}; }}")),
    );
    serde_json::from_slice(&out.stdout).expect("JSON")
}

/// The same plan from the Rust builder's parse of the same spec.
fn rust_image_plan(imex: bool) -> serde_json::Value {
    use image_builder::spec::{FileKind, Source, Spec};
    use serde_json::json;

    let text =
        std::fs::read_to_string(repo_root().join("manifests/images.toml")).expect("images.toml");
    let spec = Spec::parse(&text).expect("the shipped spec parses");
    let mut images = serde_json::Map::new();
    for (name, image) in &spec.images {
        let mut records = Vec::new();
        for file in &image.files {
            match &file.kind {
                FileKind::Dir { mode } => records.push(
                    json!({ "path": file.path, "mode": format!("{mode:04o}"), "kind": "dir" }),
                ),
                FileKind::RepoDir { dir, suffix, mode } => {
                    let listed =
                        std::fs::read_dir(repo_root().join(dir)).expect("repo_dir is listable");
                    for entry in listed {
                        let entry = entry.expect("entry");
                        let file_name = entry.file_name().to_string_lossy().into_owned();
                        if entry.file_type().expect("type").is_file()
                            && file_name.ends_with(suffix.as_str())
                        {
                            records.push(json!({
                                "path": format!("{}/{file_name}", file.path),
                                "mode": format!("{mode:04o}"),
                                "kind": "file",
                                "source": format!("repo:{dir}/{file_name}"),
                            }));
                        }
                    }
                }
                FileKind::File {
                    source,
                    mode,
                    links,
                } => {
                    let source = match source {
                        Source::Artifact { name, package } => format!("artifact:{package}/{name}"),
                        Source::Repo(path) => format!("repo:{path}"),
                        Source::Host { nix, nix_path, .. } => format!("host:{nix}/{nix_path}"),
                        Source::Imex(path) if imex => format!("imex:{path}"),
                        Source::Imex(_) => continue,
                    };
                    records.push(json!({
                        "path": file.path, "mode": format!("{mode:04o}"), "kind": "file", "source": source,
                    }));
                    let (parent, base) = file.path.rsplit_once('/').expect("absolute path");
                    for link in links {
                        let parent = if parent.is_empty() { "" } else { parent };
                        records.push(json!({ "path": format!("{parent}/{link}"), "kind": "link", "target": base }));
                    }
                }
            }
        }
        records.sort_by(|a, b| a["path"].as_str().cmp(&b["path"].as_str()));
        images.insert(name.clone(), serde_json::Value::Array(records));
    }
    serde_json::Value::Object(images)
}

#[test]
fn nix_and_rust_derive_the_same_image_contents_from_the_spec() {
    for imex in [true, false] {
        let from_nix = nix_image_plan(imex);
        let from_rust = rust_image_plan(imex);
        assert_eq!(
            from_nix,
            from_rust,
            "nix/lib.nix and crates/image-builder read manifests/images.toml differently (imex = {imex})"
        );
    }
}

/// Payload fidelity across both builders: a synthetic archive with the real
/// layout (one top directory, a pax global header, a name past 100 bytes, a
/// hard link) unpacked as stdenv's unpackPhase does (GNU tar, then the single
/// top directory) and run through the nvidia-imex derivation's installPhase
/// (evaluated from the flake against the stub) puts the same bytes and modes
/// at the paths the image spec's `imex` entries name as the Rust image
/// builder's payload reader does. (The libstdc++ resolution is
/// autoPatchelfHook's, which needs nixpkgs; not run here.)
#[test]
fn nvidia_imex_install_phase_and_the_rust_reader_agree_on_the_payload() {
    require_program("tar", "install GNU tar (Debian package tar)");
    require_program("xz", "install xz-utils");
    let install = nix_with_stub(
        &repo_root(),
        &[
            "eval",
            "--raw",
            ".#packages.x86_64-linux.nvidia-imex.installPhase",
        ],
    )
    .unwrap_or_else(|err| panic!("nix eval installPhase failed against the stub:\n{err}"));
    let tmp = tempfile::tempdir().expect("tempdir");
    let top_name = IMEX_ARCHIVE_TOP;
    let top = tmp.path().join("src").join(top_name);
    for (rel, bytes, mode) in IMEX_ARCHIVE_FILES {
        let path = top.join(rel);
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, bytes).expect("write");
        std::fs::set_permissions(&path, std::os::unix::fs::PermissionsExt::from_mode(mode))
            .expect("chmod");
    }
    let long = top.join(imex_archive_long_name());
    std::fs::create_dir_all(long.parent().expect("parent")).expect("mkdir long");
    std::fs::write(&long, b"long").expect("write long");
    let (link, target) = IMEX_ARCHIVE_HARD_LINK;
    std::fs::hard_link(top.join(target), top.join(link)).expect("hard link");
    let archive = tmp.path().join(format!("{top_name}.tar.xz"));
    let status = Command::new("tar")
        .current_dir(tmp.path().join("src"))
        .args(["--format=pax", "--pax-option=comment=cdsim", "-cJf"])
        .arg(&archive)
        .arg(top_name)
        .status()
        .expect("tar runs");
    assert!(status.success());
    // stdenv's unpackPhase: unpack, then exactly one directory is the source root.
    let unpack = tmp.path().join("unpack");
    std::fs::create_dir_all(&unpack).expect("mkdir");
    let status = Command::new("tar")
        .current_dir(&unpack)
        .arg("xf")
        .arg(&archive)
        .status()
        .expect("tar runs");
    assert!(status.success());
    let roots: Vec<_> = std::fs::read_dir(&unpack)
        .expect("read")
        .map(|it| it.expect("entry").path())
        .collect();
    assert_eq!(
        roots.len(),
        1,
        "unpackPhase needs one top directory: {roots:?}"
    );
    let out = tmp.path().join("out");
    let script = format!("set -eu\nrunHook() {{ :; }}\n{install}");
    checked(
        Command::new("bash")
            .current_dir(&roots[0])
            .env("out", &out)
            .args(["-c", &script])
            .output(),
        "installPhase",
    );
    let payload =
        image_builder::payload::Payload::open(&archive).expect("the Rust reader opens it");
    let spec_text =
        std::fs::read_to_string(repo_root().join("manifests/images.toml")).expect("spec");
    let spec: toml::Value = toml::from_str(&spec_text).expect("toml");
    let imex_paths: Vec<String> = spec["images"]["nvml-mock-workload"]["files"]
        .as_array()
        .expect("files")
        .iter()
        .filter_map(|it| it.get("imex").and_then(|v| v.as_str()).map(str::to_owned))
        .collect();
    assert_eq!(imex_paths.len(), 3, "{imex_paths:?}");
    for rel in &imex_paths {
        let from_nix =
            std::fs::read(out.join(rel)).unwrap_or_else(|err| panic!("nix out lacks {rel}: {err}"));
        let mode = permission_bits(&out.join(rel));
        let from_rust = payload.read(rel).expect(rel);
        assert_eq!(from_nix, from_rust.bytes, "{rel}: bytes differ");
        assert_eq!(mode, from_rust.mode, "{rel}: modes differ");
    }
    // The Rust reader also sees the long name and the hard link.
    assert_reads_long_name_and_hard_link(|rel| payload.read(rel).expect(rel).bytes);
}

/// Where a tool the apps put on PATH is on this machine: xtask's cache of
/// pinned tools, else PATH.
fn host_tool(name: &str) -> PathBuf {
    let cached = PathBuf::from("/var/cache/cdsim/bin").join(name);
    if cached.exists() {
        return cached;
    }
    require_program(
        name,
        "run `cargo xtask doctor` as root once (it installs the pinned tools)",
    )
}

/// The apps as a user runs them: each wrapper's script text (from the stub
/// evaluation) with the store paths of the stub's packages swapped for this
/// machine's (the built xtask; kind, helm, kubectl, jq, docker), run as an
/// unprivileged user in the docker group, the project root the read-only
/// source in the store, no Go anywhere on PATH. `doctor` and `status`
/// succeed, and the user writes nothing under the root or /var/cache.
#[test]
#[ignore = "needs the demo cluster up and the pinned tools: `cargo xtask ci` runs it after the e2e demo (step `nix apps as a user`)"]
fn apps_run_as_a_user_from_a_read_only_root() {
    use std::os::unix::fs::PermissionsExt;

    let texts = wrapper_texts();
    let work = tempfile::tempdir().expect("temp dir");
    std::fs::set_permissions(work.path(), std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let bin = work.path().join("bin");
    std::fs::create_dir(&bin).expect("mkdir");
    let xtask = integration_tests::artifact("xtask", "xtask");
    std::fs::copy(&xtask, bin.join("xtask")).expect("copy xtask");
    for (name, path) in [
        ("kind", host_tool("kind")),
        ("helm", host_tool("helm")),
        ("kubectl", host_tool("kubectl")),
        ("jq", host_tool("jq")),
        ("docker", host_tool("docker")),
    ] {
        std::fs::copy(&path, bin.join(name)).unwrap_or_else(|err| panic!("copy {name}: {err}"));
    }
    let home = work.path().join("home");
    std::fs::create_dir(&home).expect("mkdir");
    let (uid, gid) = (65534u32, 65534u32);
    std::os::unix::fs::chown(&home, Some(uid), Some(gid)).expect("chown home");
    let docker_gid = std::fs::read_to_string("/etc/group")
        .unwrap_or_default()
        .lines()
        .find_map(|line| line.strip_prefix("docker:x:"))
        .and_then(|rest| rest.split(':').next().map(str::to_owned))
        .expect("a docker group");

    let as_user = |program: &Path| -> Command {
        let mut cmd = Command::new("setpriv");
        cmd.args([
            &format!("--reuid={uid}"),
            &format!("--regid={gid}"),
            &format!("--groups={docker_gid}"),
            "--",
            "env",
            "-i",
            &format!("HOME={}", home.display()),
            &format!("PATH={}:/usr/bin:/bin", bin.display()),
        ])
        .arg(program);
        cmd
    };
    // What a user does once for a kind cluster someone else created: status
    // needs its kube context.
    let out = as_user(&bin.join("kind"))
        .args(["export", "kubeconfig", "--name", "nvml-mock-compute-domain"])
        .output()
        .expect("kind runs");
    assert!(
        out.status.success(),
        "kind export kubeconfig as the user (is the demo cluster up? `cargo xtask up`):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );

    for app in ["doctor", "status"] {
        let text = texts[app].as_str().expect("wrapper text");
        let root = text
            .lines()
            .find_map(|line| line.strip_prefix("export CDSIM_ROOT="))
            .expect("CDSIM_ROOT")
            .to_owned();
        // The stub's store paths: the tools' bin dirs on the PATH line and
        // the package's xtask.
        let mut script = String::new();
        for line in text.lines() {
            if line.starts_with("export PATH=") {
                script.push_str(&format!("export PATH=\"{}:$PATH\"\n", bin.display()));
            } else if let Some(rest) = line.strip_prefix("exec /nix/store/") {
                let (_, tail) = rest.split_once("/bin/xtask").expect("exec of xtask");
                script.push_str(&format!("exec {}/xtask{tail}\n", bin.display()));
            } else {
                script.push_str(line);
                script.push('\n');
            }
        }
        let wrapper = work.path().join(format!("cdsim-{app}"));
        std::fs::write(&wrapper, script).expect("write the wrapper");
        std::fs::set_permissions(&wrapper, std::fs::Permissions::from_mode(0o755)).expect("chmod");

        let out = as_user(&wrapper).output().expect("setpriv runs");
        assert!(
            out.status.success(),
            "`nix run .#{app}` as a user failed:\n{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        for dir in [root.as_str(), "/var/cache"] {
            let owned = Command::new("find")
                .args([dir, "-user", &uid.to_string()])
                .output()
                .expect("find runs");
            assert!(
                owned.stdout.is_empty(),
                "{app} as a user wrote under {dir}:\n{}",
                String::from_utf8_lossy(&owned.stdout)
            );
        }
    }
    assert!(
        !["/usr/bin/go", "/bin/go"]
            .iter()
            .any(|it| Path::new(it).exists()),
        "Go is on the user's PATH (/usr/bin): the test must run without Go"
    );
}

/// `nix develop`: the shell puts the toolchain and the pinned tools on PATH
/// (pkgs/build-support/mkshell/default.nix passes `packages` on as inputs),
/// so `cargo xtask scenario2` there finds kind, helm and kubectl as the apps'
/// wrappers give them.
#[test]
fn dev_shell_puts_the_pinned_tools_on_path() {
    let names = eval_json(
        &repo_root(),
        ".#devShells.x86_64-linux.default",
        "d: map (p: p.pname) d.packages",
    );
    let names: Vec<&str> = names
        .as_array()
        .expect("a list")
        .iter()
        .filter_map(|it| it.as_str())
        .collect();
    for tool in [
        "cargo",
        "rustc",
        "clippy",
        "rustfmt",
        "kind",
        "kubernetes-helm",
        "kubectl",
        "jq",
        "docker-client",
    ] {
        assert!(names.contains(&tool), "nix develop lacks {tool}: {names:?}");
    }
}

/// writeShellApplication's checkPhase runs shellcheck on the script
/// (pkgs/build-support/trivial-builders/default.nix); real peer: shellcheck.
#[test]
fn wrapper_scripts_pass_shellcheck() {
    require_program("shellcheck", "apt-get install shellcheck");
    let texts = wrapper_texts();
    let dir = tempfile::tempdir().expect("temp dir");
    for (app, text) in texts.as_object().expect("apps") {
        let path = dir.path().join(app);
        std::fs::write(&path, text.as_str().unwrap_or_default()).expect("write");
        let out = Command::new("shellcheck")
            .arg(&path)
            .output()
            .expect("shellcheck runs");
        assert!(
            out.status.success(),
            "the {app} wrapper fails shellcheck, so its real build fails:\n{}",
            String::from_utf8_lossy(&out.stdout)
        );
    }
}

/// The demo wrapper's image archives: an interrupted stream leaves nothing
/// behind, so the next run streams again; a complete one is reused. The
/// wrapper's text runs with the image streams and xtask swapped for stand-ins.
#[test]
fn an_interrupted_image_stream_is_never_reused() {
    let texts = wrapper_texts();
    let text = texts["demo"].as_str().expect("the demo wrapper");
    let cache = tempfile::tempdir().expect("temp dir");
    let run = |stream: &str| -> std::process::Output {
        let script: String = text
            .lines()
            .map(|line| {
                let trimmed = line.trim_start();
                if trimmed.starts_with("/nix/store/") && trimmed.contains("-stream-") {
                    let (_, redirect) = trimmed.split_once(" > ").expect("a redirect");
                    format!("{stream} > {redirect}\n")
                } else if trimmed.starts_with("exec /nix/store/") {
                    "echo \"$@\"\n".to_owned()
                } else {
                    format!("{line}\n")
                }
            })
            .collect();
        Command::new("bash")
            .arg("-c")
            .arg(script)
            .env("CDSIM_CACHE_DIR", cache.path())
            .output()
            .expect("bash runs")
    };
    let archives = || -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(cache.path().join("images"))
            .map(|it| {
                it.filter_map(Result::ok)
                    .map(|entry| entry.file_name().to_string_lossy().into_owned())
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    };

    let out = run("{ echo half-an-image; exit 1; }");
    assert!(!out.status.success(), "a failed stream must fail the app");
    assert!(
        archives().is_empty(),
        "an interrupted stream left {:?}",
        archives()
    );

    let out = run("echo whole-image");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let names = archives();
    assert_eq!(names.len(), 2, "{names:?}");
    assert!(names.iter().all(|it| it.ends_with(".tar")), "{names:?}");
    let args = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        args.contains("--mock-image") && args.contains(&names[0]),
        "xtask got {args}"
    );

    // Complete archives are reused: a failing stream is not even started.
    let out = run("{ exit 1; }");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}
