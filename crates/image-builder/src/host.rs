//! The build host at the edge: reading files and the loader cache.

use std::io;
use std::os::unix::fs::PermissionsExt;

use crate::closure::{HostFile, HostFs};
use crate::ldcache::{self, CacheEntry};
use crate::{Error, Result};

/// Where glibc keeps its loader cache.
pub const LD_CACHE_PATH: &str = "/etc/ld.so.cache";

/// The real file system of the build host.
#[derive(Debug, Default, Clone, Copy)]
pub struct RealFs;

impl HostFs for RealFs {
    fn read(&self, path: &str) -> io::Result<HostFile> {
        let metadata = std::fs::metadata(path)?;
        if !metadata.is_file() {
            return Err(io::Error::other(format!("{path} is not a regular file")));
        }
        Ok(HostFile {
            bytes: std::fs::read(path)?,
            mode: metadata.permissions().mode() & 0o7777,
        })
    }
}

/// The host's loader cache; an absent cache is empty (the default directories still apply).
pub fn read_ld_cache() -> Result<Vec<CacheEntry>> {
    let bytes = match std::fs::read(LD_CACHE_PATH) {
        Ok(bytes) => bytes,
        Err(err) if err.kind() == io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(source) => {
            return Err(Error::Read {
                path: LD_CACHE_PATH.into(),
                source,
            })
        }
    };
    ldcache::parse(&bytes).map_err(|reason| Error::LdCache { reason })
}
