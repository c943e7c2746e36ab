//! The one unsafe operation: adopting the socket the runtime passed as a file descriptor.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::UnixStream;

/// Takes ownership of the pre-connected socket a runtime-launched plugin inherits (fd 3).
///
/// Checks through `/proc/self/fd` that the descriptor is open and is a socket.
/// The caller must call this at most once per descriptor (main does, at startup).
pub fn inherited_socket(fd: RawFd) -> Result<UnixStream, String> {
    let link = format!("/proc/self/fd/{fd}");
    match std::fs::metadata(&link) {
        Ok(meta) if meta.file_type().is_socket() => (),
        Ok(_) => return Err(format!("file descriptor {fd} is not a socket")),
        Err(err) => return Err(format!("file descriptor {fd} is not open: {err}")),
    }
    // SAFETY: the descriptor is open and is a socket (checked above); the
    // runtime handed it to this process for the plugin's exclusive use, and
    // main adopts it exactly once, so no other owner closes it.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    Ok(stream)
}
