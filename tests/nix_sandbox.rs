//! The flake's package check phase and its rustfmt and clippy checks, run in
//! Nix's real build sandbox.
//!
//! Real peer: Debian's nix (2.8) building a derivation with `sandbox = true`
//! and the `nixbld` build users: uid 1000, `HOME=/homeless-shelter`,
//! `PATH=/path-not-set`, no network, a bare `/etc`. nixpkgs itself cannot be
//! fetched here, so `tests/nix/sandbox/rehearsal.nix` replays what its stdenv
//! and Rust hooks do around each command (a double of nixpkgs' build
//! machinery, named as such), with the host Rust toolchain and a
//! `cargo vendor` directory exposed through `extra-sandbox-paths` and `PATH`
//! limited to the tools the derivation declares. The commands themselves, the
//! test selection and the flags are read from the flake (evaluated through
//! the stub nixpkgs), so they cannot drift from what `nix flake check` runs.
//!
//! `CDSIM_NIX_SANDBOX_FLAKE=<dir>` rehearses another tree's flake (say, a
//! `git archive` of an older commit) with this tree's stub and rehearsal.
//!
//! Needs root (the local store builds with build users) and the `nixbld`
//! group with members; `cargo xtask ci` creates them. The vendored crates and
//! a cargo target dir are kept under the cache dir (`$CDSIM_CACHE_DIR`, else
//! `/var/cache/cdsim`) in `nix-sandbox/`, so warm runs rebuild only the
//! workspace crates.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;
use std::time::Instant;

use integration_tests::{checked, repo_root, require_program, require_root};

const NIX_FEATURES: &str = "nix-command flakes";

/// One rehearsal at a time: they share the kept target dir, and two cargo
/// builds on two cores only slow each other down.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn system() -> &'static str {
    match std::env::consts::ARCH {
        "aarch64" => "aarch64-linux",
        _ => "x86_64-linux",
    }
}

fn rust_triple() -> String {
    format!("{}-unknown-linux-gnu", std::env::consts::ARCH)
}

/// The flake whose commands are rehearsed: this tree, or another one.
fn flake_dir() -> PathBuf {
    std::env::var_os("CDSIM_NIX_SANDBOX_FLAKE")
        .map(PathBuf::from)
        .unwrap_or_else(repo_root)
}

fn cache_dir() -> PathBuf {
    std::env::var_os("CDSIM_CACHE_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/var/cache/cdsim"))
        .join("nix-sandbox")
}

fn run(cmd: &mut Command, what: &str) -> String {
    String::from_utf8_lossy(&checked(cmd.output(), what).stdout).into_owned()
}

/// The sandbox's prerequisites, each failing with what to do.
fn require_sandbox() {
    require_program(
        "nix-build",
        "install Debian's nix-bin (`apt-get install nix-bin`)",
    );
    require_root(
        "the sandbox rehearsal builds in the local Nix store with build users: run it as root \
         (`sudo -E cargo test -p integration-tests --test nix_sandbox`)",
    );
    let group = std::fs::read_to_string("/etc/group").unwrap_or_default();
    let members = group
        .lines()
        .find_map(|line| line.strip_prefix("nixbld:"))
        .and_then(|rest| rest.split(':').nth(2))
        .unwrap_or_default()
        .to_owned();
    assert!(
        !members.is_empty(),
        "Nix's sandbox needs the `nixbld` group with build users: `cargo xtask ci` creates them, or run \
         `groupadd --system nixbld && useradd --system --gid nixbld --groups nixbld --no-create-home \
         --home-dir /var/empty --shell /usr/sbin/nologin nixbld1`"
    );
}

/// Evaluates `apply` over `installable` of this flake with the stub nixpkgs.
fn eval_flake(installable: &str, apply: &str) -> serde_json::Value {
    let stub = format!(
        "path:{}",
        repo_root().join("tests/nix/stub-nixpkgs").display()
    );
    let out = run(
        Command::new("nix")
            .current_dir(flake_dir())
            .args(["--extra-experimental-features", NIX_FEATURES])
            .args(["eval", "--json", installable, "--apply", apply])
            .args(["--override-input", "nixpkgs", &stub, "--no-write-lock-file"]),
        &format!("nix eval {installable}"),
    );
    serde_json::from_str(&out).expect("nix eval --json prints JSON")
}

fn strings(value: &serde_json::Value) -> Vec<String> {
    value
        .as_array()
        .unwrap_or_else(|| panic!("expected a list, got {value}"))
        .iter()
        .map(|it| it.as_str().expect("a string").to_owned())
        .collect()
}

/// A word that the hooks splice unquoted into a shell command line.
fn word(text: &str) -> &str {
    assert!(
        !text.is_empty()
            && text
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || "-_=:./,+@".contains(c)),
        "`{text}` would be split or expanded by the hook's unquoted splice"
    );
    text
}

/// The host's stand-ins for a nixpkgs package: (command name, host path).
fn host_tools(package: &str, toolchain: &Path) -> Vec<(String, PathBuf)> {
    let rust = |names: &[&str]| -> Vec<(String, PathBuf)> {
        names
            .iter()
            .map(|name| {
                let path = toolchain.join("bin").join(name);
                assert!(
                    path.exists(),
                    "{} is missing: install the rustup component that provides it",
                    path.display()
                );
                (name.to_string(), PathBuf::from("/rust/bin").join(name))
            })
            .collect()
    };
    match package {
        "cargo" => rust(&["cargo"]),
        "rustc" => rust(&["rustc", "rustdoc"]),
        "rustfmt" => rust(&["rustfmt", "cargo-fmt"]),
        "clippy" => rust(&["cargo-clippy", "clippy-driver"]),
        "kubernetes-helm" => {
            let cached = PathBuf::from("/var/cache/cdsim/bin/helm");
            let helm = if cached.exists() {
                cached
            } else {
                require_program(
                    "helm",
                    "run `cargo xtask doctor` (it installs the pinned helm)",
                )
            };
            vec![("helm".to_owned(), helm)]
        }
        // The rest are Debian packages: every executable they ship.
        other => {
            let debian = match other {
                "gnused" => "sed",
                "gnugrep" => "grep",
                "gnutar" => "tar",
                "gnumake" => "make",
                "xz" => "xz-utils",
                "gawk" => "mawk",
                "util-linux" => "util-linux",
                name => name,
            };
            let listed = Command::new("dpkg")
                .args(["-L", debian])
                .output()
                .expect("dpkg runs");
            assert!(
                listed.status.success(),
                "no host stand-in for nixpkgs' {other}: install the Debian package {debian}, \
                 or map {other} in tests/nix_sandbox.rs"
            );
            let mut tools: Vec<(String, PathBuf)> = String::from_utf8_lossy(&listed.stdout)
                .lines()
                .filter(|line| line.starts_with("/usr/bin/") || line.starts_with("/bin/"))
                .map(PathBuf::from)
                .filter(|path| path.is_file())
                .map(|path| {
                    let name = path
                        .file_name()
                        .expect("a file name")
                        .to_string_lossy()
                        .into_owned();
                    (name, path)
                })
                .collect();
            if other == "gawk" {
                tools.push(("awk".to_owned(), PathBuf::from("/usr/bin/mawk")));
            }
            tools
        }
    }
}

/// stdenv's PATH before any input: pkgs/stdenv/common-path.nix, plus the C
/// compiler and binutils of stdenv.cc (as `cc`, `gcc`, `ld`, ...).
const STDENV_PATH: [&str; 14] = [
    "coreutils",
    "findutils",
    "diffutils",
    "gnused",
    "gnugrep",
    "gawk",
    "gnutar",
    "gzip",
    "bzip2",
    "gnumake",
    "bash",
    "patch",
    "xz",
    "file",
];

/// What one flake derivation runs, as the rehearsal needs it.
struct Rehearsal {
    name: String,
    src: String,
    packages: Vec<String>,
    cargo_setup: bool,
    command: String,
}

impl Rehearsal {
    /// A buildRustPackage phase of the evaluated derivation `drv`: its `src`, cargo and rustc
    /// plus the packages of each of its `inputs` lists, with the vendored-crates setup.
    fn cargo(name: &str, drv: &serde_json::Value, inputs: &[&str], command: String) -> Self {
        let mut packages = vec!["cargo".to_owned(), "rustc".to_owned()];
        for input in inputs {
            packages.extend(strings(&drv[*input]));
        }
        Rehearsal {
            name: name.to_owned(),
            src: drv["src"].as_str().expect("src").to_owned(),
            packages,
            cargo_setup: true,
            command,
        }
    }

    /// Builds it in the sandbox; returns the build log or the failure.
    fn build(&self) -> Result<String, String> {
        let toolchain = PathBuf::from(
            run(
                Command::new("rustc").args(["--print", "sysroot"]),
                "rustc --print sysroot",
            )
            .trim(),
        );
        let mut tools: Vec<(String, PathBuf)> = Vec::new();
        let mut packages: Vec<String> = STDENV_PATH.iter().map(|it| it.to_string()).collect();
        packages.extend(["gcc".to_owned(), "binutils".to_owned()]);
        packages.extend(self.packages.iter().cloned());
        for package in &packages {
            for (name, path) in host_tools(package, &toolchain) {
                // Resolved on the host: /etc/alternatives is not in the sandbox.
                let path = if path.starts_with("/rust") {
                    path
                } else {
                    std::fs::canonicalize(&path).unwrap_or(path)
                };
                tools.retain(|(it, _)| *it != name);
                tools.push((name, path));
            }
        }
        for name in ["cc", "c++"] {
            let path = std::fs::canonicalize(format!("/usr/bin/{name}"))
                .unwrap_or_else(|err| panic!("no host {name} (install build-essential): {err}"));
            tools.push((name.to_owned(), path));
        }
        let tools = tools
            .iter()
            .map(|(name, path)| format!("{name}={}", path.display()))
            .collect::<Vec<_>>()
            .join(" ");

        let cache = cache_dir();
        let vendor = vendor_dir(&cache);
        let target = cache.join("target");
        std::fs::create_dir_all(&target).expect("create the kept target dir");
        run(
            Command::new("chgrp").arg("nixbld").arg(&target),
            "chgrp nixbld",
        );
        run(Command::new("chmod").arg("2775").arg(&target), "chmod 2775");
        let sandbox_paths = format!(
            "/usr /bin=/usr/bin /lib=/usr/lib /lib64=/usr/lib64 /rust={} /cdsim-vendor={} /cdsim-target={}",
            toolchain.display(),
            vendor.display(),
            target.display()
        );
        let nonce = format!(
            "{:?}",
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap_or_default()
        );
        let out = Command::new("nix-build")
            .arg(repo_root().join("tests/nix/sandbox/rehearsal.nix"))
            .args(["--no-out-link", "--option", "sandbox", "true"])
            .args(["--option", "substituters", ""])
            .args(["--option", "build-users-group", "nixbld"])
            .args(["--option", "cores", "2"])
            .args(["--option", "extra-sandbox-paths", &sandbox_paths])
            .args(["--argstr", "name", &format!("rehearsal-{}", self.name)])
            .args(["--argstr", "system", system()])
            .args([
                "--arg",
                "src",
                &format!("builtins.storePath \"{}\"", self.src),
            ])
            .args(["--argstr", "tools", &tools])
            .args([
                "--argstr",
                "cargoSetup",
                if self.cargo_setup { "1" } else { "" },
            ])
            .args(["--argstr", "command", &self.command])
            .args(["--argstr", "nonce", &nonce])
            .output()
            .expect("nix-build runs");
        let log = format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        if out.status.success() {
            Ok(log)
        } else {
            Err(log)
        }
    }
}

/// `cargo vendor` of Cargo.lock, kept per lock file hash.
fn vendor_dir(cache: &Path) -> PathBuf {
    use sha2::Digest;
    let lock = std::fs::read(flake_dir().join("Cargo.lock")).expect("Cargo.lock");
    let hash = sha2::Sha256::digest(&lock);
    let name: String = hash.iter().take(8).map(|b| format!("{b:02x}")).collect();
    let dir = cache.join(format!("vendor-{name}"));
    if dir.join(".complete").exists() {
        return dir;
    }
    let partial = cache.join(format!("vendor-{name}.partial"));
    let _ = std::fs::remove_dir_all(&partial);
    std::fs::create_dir_all(cache).expect("create the cache dir");
    run(
        Command::new("cargo")
            .current_dir(flake_dir())
            .args(["vendor", "--locked", "--versioned-dirs"])
            .arg(&partial),
        "cargo vendor (needs crates.io or a warm cargo registry)",
    );
    // As readable as a store path: some crates ship owner-only files.
    run(
        Command::new("chmod").arg("-R").arg("a+rX").arg(&partial),
        "chmod the vendor dir",
    );
    std::fs::write(partial.join(".complete"), "").expect("mark the vendor dir complete");
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::rename(&partial, &dir).expect("rename the vendor dir");
    dir
}

/// The failing test names cargo printed, for the assertion message.
fn failed_tests(log: &str) -> Vec<String> {
    log.lines()
        .filter_map(|line| {
            let line = line.trim_start_matches(|c: char| c != 't').trim();
            line.strip_prefix("test ")
                .and_then(|rest| rest.strip_suffix(" ... FAILED"))
                .map(str::to_owned)
        })
        .collect()
}

fn rehearse(rehearsal: Rehearsal) {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|err| err.into_inner());
    let started = Instant::now();
    let res = rehearsal.build();
    eprintln!(
        "rehearsal {} took {:.0} s",
        rehearsal.name,
        started.elapsed().as_secs_f64()
    );
    if let Err(log) = res {
        let tail: Vec<&str> = log.lines().rev().take(60).collect();
        let tail: Vec<&str> = tail.into_iter().rev().collect();
        panic!(
            "`{}` failed in the Nix sandbox.\nfailed tests: {:?}\n--- last lines ---\n{}",
            rehearsal.command,
            failed_tests(&log),
            tail.join("\n")
        );
    }
}

/// The flake's default package: its check phase is cargo-check-hook.sh
/// (pkgs/build-support/rust/hooks/cargo-check-hook.sh):
/// `cargo test -j $NIX_BUILD_CORES --profile <cargoCheckType> --target <host>
/// --frozen <cargoTestFlags> -- --test-threads=$NIX_BUILD_CORES <checkFlags>`,
/// after preCheck.
#[test]
fn package_check_phase_passes_in_the_sandbox() {
    require_sandbox();
    let drv = eval_flake(
        &format!(".#packages.{}.cdsim", system()),
        "d: { inherit (d) src cargoCheckType; cargoTestFlags = d.cargoTestFlags or [ ]; \
         checkFlags = d.checkFlags or [ ]; preCheck = d.preCheck or \"\"; \
         nativeCheckInputs = map (p: p.pname) (d.nativeCheckInputs or [ ]); \
         nativeBuildInputs = map (p: p.pname) (d.nativeBuildInputs or [ ]); }",
    );
    let check_type = drv["cargoCheckType"].as_str().expect("cargoCheckType");
    let profile = if check_type == "debug" {
        String::new()
    } else {
        format!("--profile {} ", word(check_type))
    };
    let test_flags: Vec<String> = strings(&drv["cargoTestFlags"]);
    let check_flags: Vec<String> = strings(&drv["checkFlags"]);
    let command = format!(
        "{pre}\ncargo test -j $NIX_BUILD_CORES {profile}--target {triple} --frozen {tests} -- --test-threads=$NIX_BUILD_CORES {checks}",
        pre = drv["preCheck"].as_str().unwrap_or_default(),
        triple = rust_triple(),
        tests = test_flags.iter().map(|it| word(it)).collect::<Vec<_>>().join(" "),
        checks = check_flags.iter().map(|it| word(it)).collect::<Vec<_>>().join(" "),
    );
    rehearse(Rehearsal::cargo(
        "cdsim-check",
        &drv,
        &["nativeBuildInputs", "nativeCheckInputs"],
        command,
    ));
}

/// checks.rustfmt: a runCommand (no cargo setup, no vendored crates).
#[test]
fn rustfmt_check_passes_in_the_sandbox() {
    require_sandbox();
    let drv = eval_flake(
        &format!(".#checks.{}.rustfmt", system()),
        "d: { inherit (d) buildCommand; nativeBuildInputs = map (p: p.pname) (d.nativeBuildInputs or [ ]); \
         src = builtins.head (builtins.filter (p: builtins.match \".*-source\" p != null) \
         (builtins.attrNames (builtins.getContext d.buildCommand))); }",
    );
    rehearse(Rehearsal {
        name: "rustfmt".to_owned(),
        src: drv["src"]
            .as_str()
            .expect("the source in the command")
            .to_owned(),
        packages: strings(&drv["nativeBuildInputs"]),
        cargo_setup: false,
        command: drv["buildCommand"]
            .as_str()
            .expect("buildCommand")
            .to_owned(),
    });
}

/// checks.clippy: buildRustPackage with its own buildPhase.
#[test]
fn clippy_check_passes_in_the_sandbox() {
    require_sandbox();
    let drv = eval_flake(
        &format!(".#checks.{}.clippy", system()),
        "d: { inherit (d) src buildPhase; \
         nativeBuildInputs = map (p: p.pname) (d.nativeBuildInputs or [ ]); }",
    );
    let command = drv["buildPhase"].as_str().expect("buildPhase").to_owned();
    rehearse(Rehearsal::cargo(
        "clippy",
        &drv,
        &["nativeBuildInputs"],
        command,
    ));
}

/// The sandbox is the one the rehearsals claim: a probe derivation sees
/// uid 1000, HOME=/homeless-shelter, PATH=/path-not-set, no ld.so.cache and
/// no network.
#[test]
fn the_sandbox_is_the_real_one() {
    require_sandbox();
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|err| err.into_inner());
    let nonce = format!(
        "{:?}",
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap_or_default()
    );
    let probe = format!(
        r#"derivation {{
          name = "sandbox-probe";
          system = "{system}";
          nonce = "{nonce}";
          builder = "/bin/sh";
          args = [ "-c" "{{ /usr/bin/id -u; echo $HOME; echo $PATH; /usr/bin/ls -A /etc; test -e /etc/ld.so.cache && echo ld.so.cache; /usr/bin/getent ahosts crates.io || echo no-network; }} > $out" ];
        }}"#,
        system = system()
    );
    let out = run(
        Command::new("nix-build")
            .args(["--no-out-link", "-E", &probe])
            .args(["--option", "sandbox", "true"])
            .args(["--option", "substituters", ""])
            .args(["--option", "build-users-group", "nixbld"])
            .args([
                "--option",
                "extra-sandbox-paths",
                "/usr /bin=/usr/bin /lib=/usr/lib /lib64=/usr/lib64",
            ]),
        "the sandbox probe",
    );
    let seen = std::fs::read_to_string(out.trim()).expect("the probe's output");
    let lines: Vec<&str> = seen.lines().collect();
    assert_eq!(
        lines,
        [
            "1000",
            "/homeless-shelter",
            "/path-not-set",
            "group",
            "hosts",
            "passwd",
            "no-network"
        ],
        "the sandbox is not the one the rehearsals claim"
    );
}
