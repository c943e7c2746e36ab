//! `cargo xtask nvml-functions`: regenerates (or, with `--check`, compares) the mock library's
//! function list `crates/mock-nvml/nvml-functions.txt` and upstream's export list
//! `crates/mock-nvml/tests/upstream-exports.txt`.
//!
//! The header part comes from go-nvml's `nvml.h` at `[peers] go_nvml` (manifests/versions.toml),
//! found with `go mod download -json`. The extras (aliases and upstream-only stubs) and upstream's
//! export list come from upstream's pinned snapshot (`[upstream]`) when it is present; without
//! it the checked-in extras and list are kept as they are, and the command says so.
//! Parsing and rendering are pure ([`parse`]); this module only reads and writes.

pub mod parse;

use std::{fs, path::Path};

use anyhow::{bail, ensure, Context as _, Result};
use xshell::{cmd, Shell};

use crate::flags::NvmlFunctionsArgs;

/// The data file, relative to the project root.
pub const DATA_FILE: &str = "crates/mock-nvml/nvml-functions.txt";
/// Upstream's export list, relative to the project root.
pub const UPSTREAM_EXPORTS: &str = "crates/mock-nvml/tests/upstream-exports.txt";

/// Regenerates or checks both files.
pub fn run(sh: &Shell, args: &NvmlFunctionsArgs) -> Result<()> {
    let root = crate::project_root();
    let go_nvml = go_nvml_pin()?;
    let header_path = header_path(sh, &go_nvml)?;
    let header_text = fs::read_to_string(&header_path)
        .with_context(|| format!("reading {}", header_path.display()))?;
    let header = parse::parse_header(&header_text)
        .map_err(|err| anyhow::anyhow!("{}: {err}", header_path.display()))?;
    let data_path = root.join(DATA_FILE);
    let current = fs::read_to_string(&data_path).unwrap_or_default();
    let (_, current_extras) = parse::split_data(&current);
    let mut wanted = vec![(
        DATA_FILE,
        parse::render_header_part(&go_nvml, &header.functions),
        current_extras.to_owned(),
    )];
    match upstream_bridge(sh, args)? {
        Some(Bridge { snapshot, files }) => {
            let upstream = parse::parse_bridge(&files, &header.types)
                .map_err(|err| anyhow::anyhow!("upstream's bridge: {err}"))?;
            let extras = parse::extras(&header.functions, &upstream);
            wanted[0].2 = parse::render_extras_part(&snapshot, &extras);
            wanted.push((
                UPSTREAM_EXPORTS,
                parse::render_upstream_exports(&snapshot, &upstream),
                String::new(),
            ));
        }
        None => eprintln!(
            "    upstream's snapshot is absent: {DATA_FILE}'s extras and {UPSTREAM_EXPORTS} are kept as they are"
        ),
    }
    let mut stale = Vec::new();
    for (file, first, second) in wanted {
        let text = first + &second;
        let path = root.join(file);
        let now = fs::read_to_string(&path).unwrap_or_default();
        if now == text {
            eprintln!("    {file}: up to date");
        } else if args.check {
            stale.push(file);
        } else {
            fs::write(&path, text).with_context(|| format!("writing {}", path.display()))?;
            eprintln!("    {file}: written");
        }
    }
    ensure!(
        stale.is_empty(),
        "{} out of date: run `cargo xtask nvml-functions`",
        stale.join(" and ")
    );
    Ok(())
}

/// `[peers] go_nvml` from manifests/versions.toml.
fn go_nvml_pin() -> Result<String> {
    crate::tools::read_versions()?
        .get("peers")
        .and_then(|peers| peers.get("go_nvml"))
        .and_then(|value| value.as_str())
        .map(str::to_owned)
        .context("manifests/versions.toml has no [peers].go_nvml")
}

/// `nvml.h` of go-nvml at `version`, downloaded into the Go module cache.
fn header_path(sh: &Shell, version: &str) -> Result<std::path::PathBuf> {
    if crate::tools::find_program("go").is_none() {
        bail!("`go` is not on PATH: install Go to find go-nvml's nvml.h (go mod download)");
    }
    let module = format!("github.com/NVIDIA/go-nvml@{version}");
    let temp = tempfile_dir()?;
    // Outside any module, so that no go.mod of the project is consulted.
    let _dir = sh.push_dir(temp.path());
    let json = cmd!(sh, "go mod download -json {module}")
        .read()
        .with_context(|| format!("go mod download -json {module}"))?;
    let dir = serde_json::from_str::<serde_json::Value>(&json)
        .context("go mod download's JSON")?
        .get("Dir")
        .and_then(|dir| dir.as_str())
        .map(str::to_owned)
        .with_context(|| format!("go mod download -json {module} printed no Dir: {json}"))?;
    Ok(Path::new(&dir).join("pkg/nvml/nvml.h"))
}

fn tempfile_dir() -> Result<TempDir> {
    let path = std::env::temp_dir().join(format!("cdsim-nvml-functions-{}", std::process::id()));
    fs::create_dir_all(&path).with_context(|| format!("creating {}", path.display()))?;
    Ok(TempDir(path))
}

/// A scratch directory removed on drop.
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// Upstream's snapshot, read: its file name and its bridge sources (file name, text), sorted.
struct Bridge {
    snapshot: String,
    files: Vec<(String, String)>,
}

/// Upstream's bridge; `None` when the snapshot is nowhere and none was asked for.
fn upstream_bridge(sh: &Shell, args: &NvmlFunctionsArgs) -> Result<Option<Bridge>> {
    let snapshot = match crate::upstream_mock::pinned_snapshot(args.snapshot.as_deref()) {
        Ok(snapshot) => snapshot,
        Err(err) if args.snapshot.is_none() => {
            eprintln!("    {err:#}");
            return Ok(None);
        }
        Err(err) => return Err(err),
    };
    let temp = tempfile_dir()?;
    let into = temp.path();
    cmd!(
        sh,
        "tar -xzf {snapshot} -C {into} --strip-components=1 --wildcards */pkg/gpu/mocknvml/bridge/*.go"
    )
    .run()
    .with_context(|| format!("reading the bridge from {}", snapshot.display()))?;
    let bridge = into.join("pkg/gpu/mocknvml/bridge");
    let mut files = Vec::new();
    for entry in fs::read_dir(&bridge).with_context(|| format!("listing {}", bridge.display()))? {
        let path = entry?.path();
        let name = path
            .file_name()
            .map(|name| name.to_string_lossy().into_owned())
            .unwrap_or_default();
        if name.ends_with(".go") && !name.ends_with("_test.go") {
            files.push((name, fs::read_to_string(&path)?));
        }
    }
    files.sort();
    let name = snapshot
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    Ok(Some(Bridge {
        snapshot: name,
        files,
    }))
}

#[cfg(test)]
mod tests;
