//! `cargo xtask conformance`: our libnvidia-ml.so.1 against upstream's mock, call by call.
//!
//! Upstream's library, profiles and bridge sources come from `upstream_mock.rs` (built offline
//! from the pinned snapshot, shared with `bench-vs-upstream`). For each GPU profile both ship, the
//! `nvml-conformance` runner makes every case of the call script (`crates/nvml-conformance`)
//! against each library in its own process, with that side's profile in `MOCK_NVML_CONFIG`
//! (upstream's gb200 sized to 4 GPUs with `num_devices`, as its `setup.sh` sizes it; ours has 4).
//! A case that crashes the process is recorded as such and the run goes on after it. The two runs
//! are compared; every difference must be explained by the checked-in allow-list
//! (`crates/nvml-conformance/allow.toml`), and every entry must explain something.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, ensure, Context as _, Result};
use node_layout::env;
use nvml_conformance::{
    diff::{self, AllowList, Difference},
    record::{self, Outcome},
    script,
};
use xshell::{cmd, Shell};

use crate::flags::ConformanceArgs;

/// Crashes one side may have before the run is abandoned.
const MAX_CRASHES: usize = 64;

/// One profile's comparison.
struct Judged {
    profile: String,
    devices: usize,
    compared: usize,
    differences: usize,
    /// Unexplained differences.
    unexplained: Vec<Difference>,
}

/// Runs the comparison on the profiles asked for (all both sides ship by default).
pub(crate) fn run(sh: &Shell, args: &ConformanceArgs) -> Result<()> {
    let upstream = crate::upstream_mock::ensure(sh, args.snapshot.as_deref())?;
    let script = script::parse(script::SHIPPED)?;
    check_coverage(&script, &upstream_implemented(&upstream.bridge)?)?;
    let allow = AllowList::parse(diff::SHIPPED_ALLOW)?;
    eprintln!("==> building our library and the runner (release)");
    cmd!(sh, "cargo build --release -p mock-nvml -p nvml-conformance").run()?;
    let release = crate::dirs::target_dir()?.join("release");
    let runner = release.join("nvml-conformance");
    let ours = release.join("libnvidia_ml.so");
    let work = crate::dirs::target_dir()?.join("conformance");
    fs::create_dir_all(&work)?;
    let profiles = profiles(args)?;
    let mut used = vec![0usize; allow.allow.len()];
    let mut judged = Vec::new();
    for profile in &profiles {
        eprintln!("==> {profile}: both libraries, every case");
        let our_config = staged_profile(profile, &work)?;
        let their_config = upstream_config(&upstream.configs, profile, &work)?;
        let our_run = run_side(sh, &runner, &ours, &our_config)?;
        let their_run = run_side(sh, &runner, &upstream.library, &their_config)?;
        let (compared, differences) = diff::compare(&our_run.0, &their_run.0);
        let mut unexplained = Vec::new();
        for difference in &differences {
            match allow.explain(profile, difference) {
                Some(entry) => used[entry] += 1,
                None => unexplained.push(difference.clone()),
            }
        }
        write_differences(&work.join(format!("{profile}.diff")), &differences)?;
        judged.push(Judged {
            profile: profile.clone(),
            devices: our_run.1,
            compared,
            differences: differences.len(),
            unexplained,
        });
    }
    print_report(&judged, &allow, &used, &work);
    let unexplained: usize = judged.iter().map(|j| j.unexplained.len()).sum();
    let unused: Vec<&str> = allow
        .allow
        .iter()
        .zip(&used)
        .filter(|(_, count)| **count == 0)
        .map(|(entry, _)| entry.call.as_str())
        .collect();
    ensure!(
        unexplained == 0,
        "{unexplained} differences no allow-list entry explains (listed above; all differences in {}/<profile>.diff): fix the library or profile, or add an entry with its reason to crates/nvml-conformance/allow.toml",
        work.display()
    );
    ensure!(
        args.profile.is_some() || unused.is_empty(),
        "allow-list entries that explain no difference on any profile (remove them): {}",
        unused.join(", ")
    );
    Ok(())
}

/// The profiles to compare: `--profile`, else every profile we ship.
fn profiles(args: &ConformanceArgs) -> Result<Vec<String>> {
    if let Some(names) = &args.profile {
        for name in names {
            ensure!(
                harness::profiles::path(name).is_file(),
                "no profile `{name}`: the shipped ones are {}",
                shipped_profiles()?.join(", ")
            );
        }
        return Ok(names.clone());
    }
    shipped_profiles()
}

/// The shipped profiles' names.
fn shipped_profiles() -> Result<Vec<String>> {
    let dir = harness::profiles::dir();
    harness::profiles::names().with_context(|| format!("listing {}", dir.display()))
}

fn staged_profile(name: &str, work: &Path) -> Result<PathBuf> {
    let yaml = harness::profiles::path(name);
    let text = fs::read_to_string(&yaml).with_context(|| format!("reading {}", yaml.display()))?;
    let profile = nvml_profile::Profile::parse(&text)
        .with_context(|| format!("{} is not a valid profile", yaml.display()))?;
    let staged = work.join(format!("{name}.bin"));
    fs::write(&staged, nvml_profile::staged::encode(&profile))
        .with_context(|| format!("writing {}", staged.display()))?;
    Ok(staged)
}

/// Upstream's profile for `name`; gb200 sized to our 4 GPUs per tray.
fn upstream_config(configs: &Path, name: &str, work: &Path) -> Result<PathBuf> {
    let path = configs.join(format!("mock-nvml-config-{name}.yaml"));
    ensure!(
        path.is_file(),
        "upstream's snapshot has no profile `{name}` ({} is missing)",
        path.display()
    );
    if name != "gb200" {
        return Ok(path);
    }
    let text = fs::read_to_string(&path)?;
    let sized = work.join("upstream-gb200-4gpu.yaml");
    fs::write(&sized, crate::upstream_mock::with_num_devices(&text, 4)?)?;
    Ok(sized)
}

/// One side's outcomes and device count; a case that crashes the process is recorded and the run
/// goes on after it.
fn run_side(
    sh: &Shell,
    runner: &Path,
    library: &Path,
    config: &Path,
) -> Result<(Vec<Outcome>, usize)> {
    let mut outcomes = Vec::new();
    let mut skip = 0usize;
    for _ in 0..=MAX_CRASHES {
        let skip_text = skip.to_string();
        let output = cmd!(sh, "{runner} run --library {library} --skip {skip_text}")
            .env(env::MOCK_NVML_CONFIG, config)
            .env_remove(env::MOCK_TOPOLOGY_CONFIG)
            .env_remove(env::NODE_NAME)
            .env_remove(env::MOCK_NVML_XID_FILE)
            .env_remove(env::MOCK_NVML_STRICT)
            .ignore_status()
            .quiet()
            .output()?;
        let partial = record::read(&String::from_utf8_lossy(&output.stdout));
        outcomes.extend(partial.outcomes);
        if partial.done {
            let devices = outcomes
                .iter()
                .filter(|o| {
                    o.id.starts_with("nvmlDeviceGetIndex(dev") && o.id.ends_with("out:u32)")
                })
                .count();
            return Ok((outcomes, devices));
        }
        let Some((n, id)) = partial.crashed_in else {
            bail!(
                "the runner stopped outside any case on {} ({}): {}",
                library.display(),
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            );
        };
        eprintln!(
            "    {}: {id} ended the process ({})",
            library.display(),
            output.status
        );
        outcomes.push(Outcome {
            id,
            result: Err(output.status.to_string()),
        });
        skip = n + 1;
    }
    bail!(
        "{} crashed more than {MAX_CRASHES} times",
        library.display()
    )
}

/// The NVML functions upstream exports with behaviour: `//export nvml…` in its bridge, the
/// generated stubs, tests and its own `mockInternal…` hooks left out.
fn upstream_implemented(bridge: &Path) -> Result<BTreeSet<String>> {
    let mut files = Vec::new();
    for entry in fs::read_dir(bridge).with_context(|| format!("listing {}", bridge.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .unwrap_or_default()
            .to_string_lossy()
            .into_owned();
        if name.ends_with(".go") && !name.ends_with("_test.go") && name != "stubs_generated.go" {
            files.push(fs::read_to_string(&path)?);
        }
    }
    Ok(exported(&files))
}

fn exported(files: &[String]) -> BTreeSet<String> {
    files
        .iter()
        .flat_map(|text| text.lines())
        .filter_map(|line| line.trim().strip_prefix("//export "))
        .map(|name| name.trim().to_owned())
        .filter(|name| name.starts_with("nvml"))
        .collect()
}

/// Every function upstream implements is in the script, or named in its `[not-compared]`.
fn check_coverage(script: &script::Script, implemented: &BTreeSet<String>) -> Result<()> {
    let covered: BTreeSet<&str> = script
        .calls
        .iter()
        .chain(&script.lifecycle)
        .map(|call| call.function.as_str())
        .chain(script.not_compared.iter().map(|(name, _)| name.as_str()))
        .collect();
    let missing: Vec<&str> = implemented
        .iter()
        .map(String::as_str)
        .filter(|name| !covered.contains(name))
        .collect();
    ensure!(
        missing.is_empty(),
        "the call script (crates/nvml-conformance/calls.txt) leaves out functions upstream implements: {}",
        missing.join(", ")
    );
    Ok(())
}

fn write_differences(path: &Path, differences: &[Difference]) -> Result<()> {
    let mut text = String::new();
    for difference in differences {
        text.push_str(&format!(
            "{}\n    ours:     {}\n    upstream: {}\n",
            difference.id, difference.ours, difference.theirs
        ));
    }
    fs::write(path, text).with_context(|| format!("writing {}", path.display()))
}

fn print_report(judged: &[Judged], allow: &AllowList, used: &[usize], work: &Path) {
    println!("conformance: our libnvidia-ml.so.1 against upstream's mock, one call script");
    println!();
    println!("| profile | GPUs | cases compared | differences | allowed | unexplained |");
    println!("|---|---:|---:|---:|---:|---:|");
    for j in judged {
        println!(
            "| {} | {} | {} | {} | {} | {} |",
            j.profile,
            j.devices,
            j.compared,
            j.differences,
            j.differences - j.unexplained.len(),
            j.unexplained.len()
        );
    }
    println!();
    println!("allow-list (crates/nvml-conformance/allow.toml), differences each entry explains:");
    for (entry, count) in allow.allow.iter().zip(used) {
        println!("  {count:>5}  {}: {}", entry.call, entry.reason);
    }
    for j in judged.iter().filter(|j| !j.unexplained.is_empty()) {
        println!();
        println!(
            "{}: unexplained differences by function (all in {}/{}.diff)",
            j.profile,
            work.display(),
            j.profile
        );
        let mut by_function: BTreeMap<&str, Vec<&Difference>> = BTreeMap::new();
        for difference in &j.unexplained {
            by_function
                .entry(difference.function())
                .or_default()
                .push(difference);
        }
        for (function, list) in by_function {
            println!("  {function}: {} cases, e.g. {}", list.len(), list[0].id);
            println!("      ours:     {}", list[0].ours);
            println!("      upstream: {}", list[0].theirs);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn upstreams_implemented_functions_are_its_export_comments() {
        let files = [
            "//export nvmlInit_v2\nfunc nvmlInit_v2() {}\n// not //export nvmlX".to_owned(),
            "\t//export nvmlShutdown\n//export mockInternalIsDeviceHandle\n".to_owned(),
        ];
        let names: Vec<String> = exported(&files).into_iter().collect();
        assert_eq!(names, ["nvmlInit_v2", "nvmlShutdown"]);
    }

    #[test]
    fn a_function_upstream_implements_and_the_script_leaves_out_is_named() {
        let script = script::parse("[calls]\nnvmlInit_v2\n[not-compared]\nnvmlY internal table")
            .expect("parses");
        let implemented: BTreeSet<String> =
            ["nvmlInit_v2", "nvmlX", "nvmlY"].map(String::from).into();
        let err = check_coverage(&script, &implemented).expect_err("nvmlX missing");
        assert!(err.to_string().contains("nvmlX"), "{err}");
        assert!(!err.to_string().contains("nvmlY"), "{err}");
    }
}
