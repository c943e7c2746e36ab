//! The staged `nvidia-imex`: the NO GPU shim with the IMEX daemon appended.
//!
//! NVIDIA's compute-domain kubelet plugin gives its daemon's container the
//! driver root's `nvidia-imex` and `nvidia-imex-ctl` and nothing else of
//! `usr/bin`, so the shim cannot exec a daemon beside it: the stager appends
//! the daemon to the shim, and the shim finds it at its own end.
//!
//! Layout: `<shim ELF> <daemon bytes> <daemon length: u64 LE> <MAGIC>`. A
//! shim without the trailer carries nothing and execs its daemon by path.

/// The last 8 bytes of a shim that carries a daemon.
pub const MAGIC: [u8; 8] = *b"cdsimIMX";

/// The trailer's size: the length, then [`MAGIC`].
pub const TRAILER_LEN: usize = 16;

/// The shim with `daemon` appended and the trailer that finds it.
pub fn bundle(shim: &[u8], daemon: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(shim.len() + daemon.len() + TRAILER_LEN);
    out.extend_from_slice(shim);
    out.extend_from_slice(daemon);
    out.extend_from_slice(&(daemon.len() as u64).to_le_bytes());
    out.extend_from_slice(&MAGIC);
    out
}

/// Where the carried daemon is in a file of `file_len` bytes whose last
/// [`TRAILER_LEN`] bytes are `trailer`: its offset and length. `None` when the
/// file carries none (no magic) or the length does not fit in the file.
pub fn carried(trailer: &[u8], file_len: u64) -> Option<(u64, u64)> {
    let (len, magic) = trailer.split_at_checked(8)?;
    if magic != MAGIC || trailer.len() != TRAILER_LEN {
        return None;
    }
    let len = u64::from_le_bytes(len.try_into().ok()?);
    let end = file_len.checked_sub(TRAILER_LEN as u64)?;
    let offset = end.checked_sub(len)?;
    Some((offset, len))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn trailer(file: &[u8]) -> &[u8] {
        &file[file.len() - TRAILER_LEN..]
    }

    #[test]
    fn the_daemon_is_found_again_at_the_end_of_the_bundle() {
        let file = bundle(b"\x7fELF shim", b"the daemon");
        let (offset, len) = carried(trailer(&file), file.len() as u64).expect("carried");
        let daemon = &file[offset as usize..(offset + len) as usize];
        assert_eq!(daemon, b"the daemon");
        assert_eq!(&file[..offset as usize], b"\x7fELF shim");
    }

    #[test]
    fn a_plain_shim_or_a_damaged_trailer_carries_nothing() {
        let plain = b"\x7fELF a shim that is long enough to have sixteen bytes";
        assert_eq!(carried(trailer(plain), plain.len() as u64), None);
        let mut file = bundle(b"shim", b"daemon");
        let len = file.len();
        // A length past the start of the file.
        file[len - TRAILER_LEN..len - 8].copy_from_slice(&u64::MAX.to_le_bytes());
        assert_eq!(carried(trailer(&file), len as u64), None);
        assert_eq!(carried(b"cdsimIMX", 8), None, "too short");
        let empty = bundle(b"", b"");
        assert_eq!(carried(&empty, empty.len() as u64), Some((0, 0)));
    }
}
