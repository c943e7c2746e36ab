//! The daemon the shim carries at its own end (`node_layout::imex_bundle`),
//! copied into a memfd so that it can be executed without writing a file.

use std::fs::File;
use std::io::{self, Read, Seek, SeekFrom};
use std::os::fd::IntoRawFd;
use std::path::PathBuf;

use node_layout::imex_bundle::{self, TRAILER_LEN};
use rustix::fs::{memfd_create, MemfdFlags};

/// `/proc/self/fd/<n>` of a memfd holding the carried daemon, or `None` when
/// this shim carries none. The memfd is close-on-exec: the kernel has opened
/// the ELF file before it closes the descriptor, and the daemon inherits none.
pub fn daemon() -> io::Result<Option<PathBuf>> {
    let mut exe = File::open("/proc/self/exe")?;
    let file_len = exe.metadata()?.len();
    if file_len < TRAILER_LEN as u64 {
        return Ok(None);
    }
    let mut trailer = [0u8; TRAILER_LEN];
    exe.seek(SeekFrom::Start(file_len - TRAILER_LEN as u64))?;
    exe.read_exact(&mut trailer)?;
    let Some((offset, len)) = imex_bundle::carried(&trailer, file_len) else {
        return Ok(None);
    };
    let memfd = File::from(memfd_create("nvidia-imex", MemfdFlags::CLOEXEC)?);
    exe.seek(SeekFrom::Start(offset))?;
    let copied = io::copy(&mut (&mut exe).take(len), &mut &memfd)?;
    if copied != len {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            format!("the daemon is {len} bytes, {copied} read"),
        ));
    }
    // Left open until the exec (close-on-exec): the path names it.
    let fd = memfd.into_raw_fd();
    Ok(Some(PathBuf::from(format!("/proc/self/fd/{fd}"))))
}
