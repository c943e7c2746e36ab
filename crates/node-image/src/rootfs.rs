//! Debian root filesystems for the node and for the iptables-using pod images
//! (kube-proxy, the network daemon): debootstrap from the host's apt mirror,
//! cached by suite and package list, then turned into a kind node tree (kind's
//! systemd pruning, our units and entrypoint, the binaries).

use std::{
    fs,
    os::unix::fs::{symlink, PermissionsExt},
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use xshell::{cmd, Shell};

/// The Debian mirror when nothing better is known.
pub const DEFAULT_MIRROR: &str = "http://deb.debian.org/debian";

/// The first `deb` mirror in apt's configuration (one-line `sources.list` or
/// deb822 `.sources` text) that serves `suite`'s main archive.
pub fn mirror_from_apt(text: &str, suite: &str) -> Option<String> {
    // deb822: stanzas separated by blank lines.
    for stanza in text.split("\n\n") {
        let field = |name: &str| {
            stanza.lines().find_map(|line| {
                let (key, value) = line.split_once(':')?;
                (key.trim().eq_ignore_ascii_case(name)).then(|| value.trim().to_owned())
            })
        };
        let (Some(types), Some(uris), Some(suites)) =
            (field("Types"), field("URIs"), field("Suites"))
        else {
            continue;
        };
        if types.split_whitespace().any(|t| t == "deb")
            && suites.split_whitespace().any(|s| s == suite)
        {
            if let Some(uri) = uris.split_whitespace().next() {
                return Some(uri.trim_end_matches('/').to_owned());
            }
        }
    }
    // One-line format: deb [options] uri suite components...
    for line in text.lines() {
        let line = line.trim();
        let Some(rest) = line.strip_prefix("deb ") else {
            continue;
        };
        let rest = rest.trim_start();
        let rest = match rest.strip_prefix('[') {
            Some(options) => options.split_once(']').map_or("", |(_, after)| after),
            None => rest,
        };
        let mut words = rest.split_whitespace();
        let (Some(uri), Some(line_suite)) = (words.next(), words.next()) else {
            continue;
        };
        if line_suite == suite {
            return Some(uri.trim_end_matches('/').to_owned());
        }
    }
    None
}

/// The mirror to debootstrap from: `CDSIM_DEBIAN_MIRROR`, else apt's, else deb.debian.org.
pub fn debian_mirror(suite: &str) -> String {
    if let Ok(mirror) = std::env::var("CDSIM_DEBIAN_MIRROR") {
        if !mirror.is_empty() {
            return mirror;
        }
    }
    let mut texts = Vec::new();
    if let Ok(text) = fs::read_to_string("/etc/apt/sources.list") {
        texts.push(text);
    }
    if let Ok(entries) = fs::read_dir("/etc/apt/sources.list.d") {
        let mut paths: Vec<PathBuf> = entries
            .filter_map(|entry| entry.ok().map(|e| e.path()))
            .collect();
        paths.sort();
        for path in paths {
            let is_source = path
                .extension()
                .is_some_and(|ext| ext == "sources" || ext == "list");
            if is_source {
                if let Ok(text) = fs::read_to_string(&path) {
                    texts.push(text);
                }
            }
        }
    }
    texts
        .iter()
        .find_map(|text| mirror_from_apt(text, suite))
        .unwrap_or_else(|| DEFAULT_MIRROR.to_owned())
}

/// Parses a package list file: one package per line, `#` comments.
pub fn parse_packages(text: &str) -> Result<Vec<String>> {
    let mut packages = Vec::new();
    for (index, raw) in text.lines().enumerate() {
        let line = raw.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let valid = line.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-' || b == b'+' || b == b'.'
        });
        if !valid {
            bail!("line {}: {line:?} is not a Debian package name", index + 1);
        }
        packages.push(line.to_owned());
    }
    if packages.is_empty() {
        bail!("the package list is empty");
    }
    Ok(packages)
}

/// A debootstrapped tree in the cache, keyed by suite and packages; built once.
pub fn debootstrap(
    sh: &Shell,
    cache: &Path,
    name: &str,
    suite: &str,
    packages: &[String],
) -> Result<PathBuf> {
    let mut hasher = Sha256::new();
    hasher.update(format!("{suite}\0{}", packages.join(",")));
    let digest = &format!("{:x}", hasher.finalize())[..12];
    let dir = cache
        .join("rootfs")
        .join(format!("{name}-{suite}-{digest}"));
    if dir.join(".cdsim-complete").is_file() {
        eprintln!("    reusing {}", dir.display());
        return Ok(dir);
    }
    if xtask_support::tools::find_program("debootstrap").is_none() {
        bail!("debootstrap is not installed: apt-get install debootstrap");
    }
    let partial = dir.with_extension("partial");
    if partial.exists() {
        fs::remove_dir_all(&partial).with_context(|| format!("removing {}", partial.display()))?;
    }
    let debs = cache.join("debs");
    fs::create_dir_all(&debs).with_context(|| format!("creating {}", debs.display()))?;
    let mirror = debian_mirror(suite);
    let include = format!("--include={}", packages.join(","));
    let cache_arg = format!("--cache-dir={}", debs.display());
    eprintln!(
        "    debootstrap {suite} from {mirror} ({} packages)",
        packages.len()
    );
    cmd!(sh, "nice -n 10 debootstrap --variant=minbase {cache_arg} {include} {suite} {partial} {mirror}")
        .run()
        .with_context(|| format!("debootstrap {suite} from {mirror} failed (override the mirror with CDSIM_DEBIAN_MIRROR)"))?;
    fs::write(partial.join(".cdsim-complete"), b"").context("marking the rootfs complete")?;
    fs::rename(&partial, &dir)
        .with_context(|| format!("moving {} into place", partial.display()))?;
    Ok(dir)
}

/// Copies a cached tree to `dest` (which must not exist), keeping owners and modes.
pub fn copy_tree(sh: &Shell, src: &Path, dest: &Path) -> Result<()> {
    let src_contents = format!("{}/.", src.display());
    fs::create_dir_all(dest).with_context(|| format!("creating {}", dest.display()))?;
    cmd!(sh, "cp -a {src_contents} {dest}")
        .run()
        .with_context(|| format!("copying {}", src.display()))?;
    let _ = fs::remove_file(dest.join(".cdsim-complete"));
    Ok(())
}

/// Removes package caches, docs, message translations and device nodes;
/// empties machine-id.
pub fn slim(root: &Path) -> Result<()> {
    for dir in [
        "var/cache/apt/archives",
        "var/lib/apt/lists",
        "usr/share/doc",
        "usr/share/man",
        "usr/share/info",
        "usr/share/locale",
        "dev",
    ] {
        empty_dir(&root.join(dir))?;
    }
    write(root, "etc/machine-id", b"", 0o444)?;
    Ok(())
}

/// kind's systemd pruning: no gettys, udev or tmpfiles units in a container.
pub fn prune_systemd(root: &Path) -> Result<()> {
    for dir in [
        "lib/systemd/system/multi-user.target.wants",
        "lib/systemd/system/local-fs.target.wants",
        "lib/systemd/system/basic.target.wants",
        "etc/systemd/system/multi-user.target.wants",
    ] {
        empty_dir(&root.join(dir))?;
    }
    let etc_systemd = root.join("etc/systemd/system");
    if let Ok(entries) = fs::read_dir(&etc_systemd) {
        for entry in entries.flatten() {
            if entry.file_name().to_string_lossy().ends_with(".wants") {
                empty_dir(&entry.path())?;
            }
        }
    }
    let sysinit =
        root.join("lib/systemd/system/sysinit.target.wants/systemd-tmpfiles-setup.service");
    remove_if_present(&sysinit)?;
    let sockets = root.join("lib/systemd/system/sockets.target.wants");
    if let Ok(entries) = fs::read_dir(&sockets) {
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            if name.contains("udev") || name.contains("initctl") {
                remove_if_present(&entry.path())?;
            }
        }
    }
    let journald = root.join("etc/systemd/journald.conf");
    let mut conf = fs::read_to_string(&journald).unwrap_or_else(|_| "[Journal]\n".to_owned());
    if !conf.contains("\nReadKMsg=no") {
        conf.push_str("ReadKMsg=no\n");
        fs::write(&journald, conf).with_context(|| format!("writing {}", journald.display()))?;
    }
    let init = root.join("sbin/init");
    remove_if_present(&init)?;
    symlink("/lib/systemd/systemd", &init)
        .with_context(|| format!("linking {}", init.display()))?;
    Ok(())
}

/// Enables `units` for multi-user.target and masks `masked`, as `systemctl --root` would.
pub fn enable_units(root: &Path, units: &[&str], masked: &[&str]) -> Result<()> {
    let wants = root.join("etc/systemd/system/multi-user.target.wants");
    fs::create_dir_all(&wants).with_context(|| format!("creating {}", wants.display()))?;
    for unit in units {
        let link = wants.join(unit);
        remove_if_present(&link)?;
        symlink(format!("/etc/systemd/system/{unit}"), &link)
            .with_context(|| format!("enabling {unit}"))?;
    }
    for unit in masked {
        let link = root.join("etc/systemd/system").join(unit);
        remove_if_present(&link)?;
        symlink("/dev/null", &link).with_context(|| format!("masking {unit}"))?;
    }
    Ok(())
}

/// Copies every file under `src` into `root` at the same relative path.
/// Files that are executable in `src` get 0755, the rest 0644; `substitute`
/// replaces `@NAME@` placeholders in text files.
pub fn overlay(src: &Path, root: &Path, substitute: &[(&str, &str)]) -> Result<Vec<String>> {
    let mut written = Vec::new();
    for (relative, executable) in walk_files(src)? {
        let mut contents =
            fs::read(src.join(&relative)).with_context(|| format!("reading {relative}"))?;
        if let Ok(text) = String::from_utf8(contents.clone()) {
            let mut text = text;
            for (placeholder, value) in substitute {
                text = text.replace(placeholder, value);
            }
            if let Some(start) = text.find('@') {
                let rest = &text[start + 1..];
                if let Some(end) = rest.find('@') {
                    let name = &rest[..end];
                    if !name.is_empty() && name.bytes().all(|b| b.is_ascii_uppercase() || b == b'_')
                    {
                        bail!("{relative}: placeholder @{name}@ has no value");
                    }
                }
            }
            contents = text.into_bytes();
        }
        write(
            root,
            &relative,
            &contents,
            if executable { 0o755 } else { 0o644 },
        )?;
        written.push(relative);
    }
    Ok(written)
}

/// Every regular file under `dir` as (relative path, executable), sorted.
pub fn walk_files(dir: &Path) -> Result<Vec<(String, bool)>> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(current) = stack.pop() {
        let entries =
            fs::read_dir(&current).with_context(|| format!("reading {}", current.display()))?;
        for entry in entries {
            let entry = entry.with_context(|| format!("reading {}", current.display()))?;
            let path = entry.path();
            let meta =
                fs::symlink_metadata(&path).with_context(|| format!("stat {}", path.display()))?;
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let relative = path
                    .strip_prefix(dir)
                    .with_context(|| format!("{} is outside {}", path.display(), dir.display()))?
                    .to_string_lossy()
                    .into_owned();
                out.push((relative, meta.permissions().mode() & 0o111 != 0));
            } else {
                bail!(
                    "{}: only regular files and directories belong in the node image inputs",
                    path.display()
                );
            }
        }
    }
    out.sort();
    Ok(out)
}

/// Writes `contents` at `root/relative` with `mode`, creating parent directories.
pub fn write(root: &Path, relative: &str, contents: &[u8], mode: u32) -> Result<()> {
    let path = root.join(relative);
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    }
    remove_if_present(&path)?;
    fs::write(&path, contents).with_context(|| format!("writing {}", path.display()))?;
    fs::set_permissions(&path, fs::Permissions::from_mode(mode))
        .with_context(|| format!("chmod {}", path.display()))?;
    Ok(())
}

/// Copies a host file into the tree with `mode`.
pub fn install(src: &Path, root: &Path, relative: &str, mode: u32) -> Result<()> {
    let contents = fs::read(src).with_context(|| format!("reading {}", src.display()))?;
    write(root, relative, &contents, mode)
}

fn empty_dir(dir: &Path) -> Result<()> {
    let Ok(entries) = fs::read_dir(dir) else {
        return Ok(());
    };
    for entry in entries.flatten() {
        let path = entry.path();
        let is_dir = fs::symlink_metadata(&path)
            .map(|meta| meta.is_dir())
            .unwrap_or(false);
        if is_dir {
            fs::remove_dir_all(&path).with_context(|| format!("removing {}", path.display()))?;
        } else {
            remove_if_present(&path)?;
        }
    }
    Ok(())
}

fn remove_if_present(path: &Path) -> Result<()> {
    match fs::remove_file(path) {
        Ok(()) => Ok(()),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err).with_context(|| format!("removing {}", path.display())),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slimming_empties_caches_docs_and_translations_and_keeps_the_rest() {
        let root = tempfile::tempdir().expect("tempdir");
        let r = root.path();
        for path in [
            "var/cache/apt/archives/iptables.deb",
            "var/lib/apt/lists/deb.debian.org_Packages",
            "usr/share/doc/iptables/copyright",
            "usr/share/locale/de/LC_MESSAGES/iptables.mo",
            "usr/share/zoneinfo/UTC",
            "usr/sbin/iptables",
        ] {
            write(r, path, b"x", 0o644).expect("write");
        }
        slim(r).expect("slim");
        for gone in [
            "var/cache/apt/archives/iptables.deb",
            "var/lib/apt/lists/deb.debian.org_Packages",
            "usr/share/doc/iptables",
            "usr/share/locale/de",
        ] {
            assert!(!r.join(gone).exists(), "{gone} left");
        }
        assert!(r.join("usr/share/locale").is_dir(), "the directory stays");
        assert!(r.join("usr/share/zoneinfo/UTC").exists());
        assert!(r.join("usr/sbin/iptables").exists());
        assert_eq!(fs::read(r.join("etc/machine-id")).expect("written"), b"");
    }

    #[test]
    fn deb822_mirror_for_the_suite() {
        let text = "Types: deb\n# snapshot comment\nURIs: http://deb.debian.org/debian/\nSuites: bookworm bookworm-updates\nComponents: main\n\n\
Types: deb\nURIs: http://deb.debian.org/debian-security\nSuites: bookworm-security\nComponents: main\n";
        assert_eq!(
            mirror_from_apt(text, "bookworm").as_deref(),
            Some("http://deb.debian.org/debian")
        );
        assert_eq!(mirror_from_apt(text, "trixie"), None);
    }

    #[test]
    fn one_line_mirror_for_the_suite() {
        let text = "# comment\ndeb-src http://src.example/debian bookworm main\n\
deb [arch=amd64 signed-by=/k.gpg] http://mirror.example/debian bookworm main\n";
        assert_eq!(
            mirror_from_apt(text, "bookworm").as_deref(),
            Some("http://mirror.example/debian")
        );
    }

    #[test]
    fn package_lists_are_validated() {
        let packages = parse_packages("# node\nsystemd\n\niptables # both backends\nlibseccomp2\n")
            .expect("valid");
        assert_eq!(packages, ["systemd", "iptables", "libseccomp2"]);
        let err = parse_packages("systemd\nrm -rf\n").expect_err("space");
        assert!(err.to_string().contains("line 2"), "{err}");
        assert!(parse_packages("# nothing\n").is_err());
    }

    #[test]
    fn overlay_substitutes_and_sets_modes() {
        let src = tempfile::tempdir().expect("tempdir");
        let root = tempfile::tempdir().expect("tempdir");
        write(
            src.path(),
            "etc/conf.toml",
            b"image = \"@PAUSE_IMAGE@\"\n",
            0o644,
        )
        .expect("write");
        write(
            src.path(),
            "usr/local/bin/entrypoint",
            b"#!/bin/sh\n",
            0o755,
        )
        .expect("write");
        let written = overlay(
            src.path(),
            root.path(),
            &[("@PAUSE_IMAGE@", "registry.k8s.io/pause:3.10.1")],
        )
        .expect("overlay");
        assert_eq!(written, ["etc/conf.toml", "usr/local/bin/entrypoint"]);
        let conf = fs::read_to_string(root.path().join("etc/conf.toml")).expect("read");
        assert_eq!(conf, "image = \"registry.k8s.io/pause:3.10.1\"\n");
        let mode = |p: &str| test_support::permission_bits(&root.path().join(p));
        assert_eq!(mode("usr/local/bin/entrypoint"), 0o755);
        assert_eq!(mode("etc/conf.toml"), 0o644);
        let err = overlay(src.path(), root.path(), &[]).expect_err("unfilled placeholder");
        assert!(
            err.to_string().contains("@PAUSE_IMAGE@ has no value"),
            "{err}"
        );
    }

    #[test]
    fn pruning_and_enabling_shape_systemd() {
        let root = tempfile::tempdir().expect("tempdir");
        let r = root.path();
        write(
            r,
            "lib/systemd/system/multi-user.target.wants/getty.target",
            b"",
            0o644,
        )
        .expect("write");
        write(
            r,
            "lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket",
            b"",
            0o644,
        )
        .expect("write");
        write(
            r,
            "lib/systemd/system/sockets.target.wants/systemd-journald.socket",
            b"",
            0o644,
        )
        .expect("write");
        write(
            r,
            "etc/systemd/system/timers.target.wants/apt-daily.timer",
            b"",
            0o644,
        )
        .expect("write");
        write(r, "etc/systemd/journald.conf", b"[Journal]\n", 0o644).expect("write");
        fs::create_dir_all(r.join("sbin")).expect("mkdir");
        prune_systemd(r).expect("prune");
        enable_units(r, &["containerd.service"], &["systemd-binfmt.service"]).expect("enable");
        assert!(!r
            .join("lib/systemd/system/multi-user.target.wants/getty.target")
            .exists());
        assert!(!r
            .join("lib/systemd/system/sockets.target.wants/systemd-udevd-control.socket")
            .exists());
        assert!(r
            .join("lib/systemd/system/sockets.target.wants/systemd-journald.socket")
            .exists());
        assert!(!r
            .join("etc/systemd/system/timers.target.wants/apt-daily.timer")
            .exists());
        let journald = fs::read_to_string(r.join("etc/systemd/journald.conf")).expect("read");
        assert!(journald.ends_with("ReadKMsg=no\n"), "{journald}");
        let link = |p: &str| fs::read_link(r.join(p)).expect("symlink");
        assert_eq!(link("sbin/init"), Path::new("/lib/systemd/systemd"));
        assert_eq!(
            link("etc/systemd/system/multi-user.target.wants/containerd.service"),
            Path::new("/etc/systemd/system/containerd.service")
        );
        assert_eq!(
            link("etc/systemd/system/systemd-binfmt.service"),
            Path::new("/dev/null")
        );
    }
}
