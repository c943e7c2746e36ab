//! Finding the profile and the topology from where the library itself is installed, for
//! consumers that load it with none of our variables (NVIDIA's DRA driver mounts the staged
//! driver root at `/driver-root`; its init container runs `env -i LD_PRELOAD=<lib> nvidia-smi`).
//!
//! The library's own path comes from `/proc/self/maps` (the mapping that holds this module's
//! code; the kernel shows it with symlinks resolved). The driver root is the nearest of its
//! directory's ancestors, up to [`MAX_DEPTH`] levels, holding the staged profile
//! `config/profile.bin`; the staged tree puts the library at `<root>/usr/lib64/`, two levels
//! below. The topology is `<root>/topology/topology.bin` when that file exists (both names are
//! `node_layout`'s).
//!
//! Safe code only: reading a procfs file and comparing addresses.

use std::path::{Path, PathBuf};

/// The staged profile's path relative to the driver root.
pub const PROFILE: &str = node_layout::paths::PROFILE_IN_DRIVER;
/// The staged topology's path relative to the driver root.
pub const TOPOLOGY: &str = node_layout::paths::TOPOLOGY_IN_DRIVER;
/// How many ancestors of the library's directory are tried (itself, `usr`, the root).
pub const MAX_DEPTH: usize = 3;

/// The driver root this library was loaded from, if it is inside one.
pub fn driver_root() -> Option<PathBuf> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let library = mapping_path(&maps, driver_root as *const () as usize)?;
    root_of(&library, |candidate| candidate.join(PROFILE).is_file())
}

/// The profile beside the library, if any.
pub fn profile() -> Option<PathBuf> {
    driver_root().map(|root| root.join(PROFILE))
}

/// The topology beside the library, if the file exists.
pub fn topology() -> Option<PathBuf> {
    driver_root()
        .map(|root| root.join(TOPOLOGY))
        .filter(|path| path.is_file())
}

/// The file mapped at `address` in a `/proc/<pid>/maps` text.
pub fn mapping_path(maps: &str, address: usize) -> Option<PathBuf> {
    maps.lines().find_map(|line| {
        let mut fields = line.splitn(6, ' ');
        let range = fields.next()?;
        let (start, end) = range.split_once('-')?;
        let start = usize::from_str_radix(start, 16).ok()?;
        let end = usize::from_str_radix(end, 16).ok()?;
        if !(start..end).contains(&address) {
            return None;
        }
        // perms, offset, dev, inode, then the path padded with spaces.
        let path = fields.nth(4)?.trim_start();
        path.starts_with('/')
            .then(|| PathBuf::from(path.trim_end_matches(" (deleted)")))
    })
}

/// The nearest ancestor of `library`'s directory (at most [`MAX_DEPTH`]) that `is_root` accepts.
pub fn root_of(library: &Path, is_root: impl Fn(&Path) -> bool) -> Option<PathBuf> {
    library
        .parent()?
        .ancestors()
        .take(MAX_DEPTH)
        .find(|candidate| is_root(candidate))
        .map(Path::to_path_buf)
}

#[cfg(test)]
mod tests {
    use super::*;

    const MAPS: &str = "\
5581a000-5581b000 r--p 00000000 08:01 1234                       /usr/bin/nvidia-smi
7f10a000-7f10c000 r-xp 00002000 08:01 99                         /driver-root-parent/driver/usr/lib64/libnvidia-ml.so.580.65.06
7f10c000-7f10d000 rw-p 00000000 00:00 0 
7ffd1000-7ffd2000 r-xp 00000000 00:00 0                          [vdso]
";

    #[test]
    fn the_mapping_holding_an_address_names_the_library() {
        assert_eq!(
            mapping_path(MAPS, 0x7f10_b123),
            Some(PathBuf::from(
                "/driver-root-parent/driver/usr/lib64/libnvidia-ml.so.580.65.06"
            ))
        );
        assert_eq!(
            mapping_path(MAPS, 0x5581_a000),
            Some(PathBuf::from("/usr/bin/nvidia-smi"))
        );
        assert_eq!(mapping_path(MAPS, 0x7f10_c010), None, "anonymous");
        assert_eq!(mapping_path(MAPS, 0x7ffd_1000), None, "not a file");
        assert_eq!(mapping_path(MAPS, 0x1000), None, "unmapped");
        assert_eq!(mapping_path("garbage\n", 0x1000), None);
    }

    #[test]
    fn the_root_is_the_nearest_ancestor_with_a_profile() {
        let library = Path::new("/d/driver/usr/lib64/libnvidia-ml.so.1");
        assert_eq!(
            root_of(library, |dir| dir == Path::new("/d/driver")),
            Some(PathBuf::from("/d/driver"))
        );
        assert_eq!(
            root_of(library, |dir| dir == Path::new("/d/driver/usr/lib64")),
            Some(PathBuf::from("/d/driver/usr/lib64"))
        );
        assert_eq!(
            root_of(library, |dir| dir == Path::new("/d")),
            None,
            "more than three levels up is not ours"
        );
    }

    #[test]
    fn this_test_binary_is_found_in_its_own_maps() {
        let maps = std::fs::read_to_string("/proc/self/maps").unwrap_or_default();
        let found = mapping_path(&maps, driver_root as *const () as usize);
        let exe = std::env::current_exe()
            .ok()
            .and_then(|exe| exe.canonicalize().ok());
        assert!(found.is_some() && found == exe, "{found:?} vs {exe:?}");
    }
}
