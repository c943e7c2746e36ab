//! What the dynamic loader needs from an ELF file: its interpreter, its
//! `DT_NEEDED` libraries and its search paths. Pure: bytes in, facts out.

use goblin::elf::{header, Elf};

/// The loader-relevant facts of one ELF file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ElfInfo {
    /// `e_machine` (`EM_X86_64` = 62, `EM_AARCH64` = 183).
    pub machine: u16,
    /// Whether the file is ELF64.
    pub is_64: bool,
    /// `DT_SONAME`, for shared libraries.
    pub soname: Option<String>,
    /// `PT_INTERP`, for executables linked dynamically.
    pub interpreter: Option<String>,
    /// `DT_NEEDED` entries, in order.
    pub needed: Vec<String>,
    /// `DT_RPATH` directories (used only when there is no `DT_RUNPATH`).
    pub rpath: Vec<String>,
    /// `DT_RUNPATH` directories.
    pub runpath: Vec<String>,
}

impl ElfInfo {
    /// The Debian multiarch triplet of this machine, for the default library directories.
    pub fn multiarch(&self) -> Option<&'static str> {
        match (self.machine, self.is_64) {
            (header::EM_X86_64, true) => Some("x86_64-linux-gnu"),
            (header::EM_AARCH64, true) => Some("aarch64-linux-gnu"),
            (header::EM_386, false) => Some("i386-linux-gnu"),
            (header::EM_ARM, false) => Some("arm-linux-gnueabihf"),
            _ => None,
        }
    }

    /// The OCI architecture name of this machine (`amd64`, `arm64`).
    pub fn oci_architecture(&self) -> Option<&'static str> {
        match self.machine {
            header::EM_X86_64 => Some("amd64"),
            header::EM_AARCH64 => Some("arm64"),
            header::EM_386 => Some("386"),
            header::EM_ARM => Some("arm"),
            _ => None,
        }
    }

    /// Whether a library with `other`'s header can be loaded into this process.
    pub fn compatible(&self, other: &ElfInfo) -> bool {
        self.machine == other.machine && self.is_64 == other.is_64
    }
}

/// Whether the bytes start with the ELF magic.
pub fn is_elf(bytes: &[u8]) -> bool {
    bytes.starts_with(b"\x7fELF")
}

/// Parses the loader facts of an ELF file; `Err` carries goblin's reason.
pub fn parse(bytes: &[u8]) -> Result<ElfInfo, String> {
    let elf = Elf::parse(bytes).map_err(|err| err.to_string())?;
    let split = |entries: &[&str]| -> Vec<String> {
        entries
            .iter()
            .flat_map(|entry| entry.split(':'))
            .filter(|dir| !dir.is_empty())
            .map(str::to_owned)
            .collect()
    };
    Ok(ElfInfo {
        machine: elf.header.e_machine,
        is_64: elf.is_64,
        soname: elf.soname.map(str::to_owned),
        interpreter: elf.interpreter.map(str::to_owned),
        needed: elf.libraries.iter().map(|lib| (*lib).to_owned()).collect(),
        rpath: split(&elf.rpaths),
        runpath: split(&elf.runpaths),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_dynamic_executable() {
        // The test binary itself is a dynamically linked executable of the host's machine.
        let exe = std::env::current_exe().expect("current exe");
        let bytes = std::fs::read(&exe).expect("read current exe");
        assert!(is_elf(&bytes));
        let info = parse(&bytes).expect("parse current exe");
        assert!(
            info.interpreter
                .as_deref()
                .is_some_and(|interp| interp.starts_with('/')),
            "{info:?}"
        );
        assert!(
            info.needed.iter().any(|lib| lib.starts_with("libc.so")),
            "{info:?}"
        );
        assert!(info.multiarch().is_some());
        assert_eq!(
            info.oci_architecture().is_some(),
            info.multiarch().is_some()
        );
    }

    #[test]
    fn rejects_garbage() {
        assert!(!is_elf(b"#!/bin/sh\n"));
        assert!(parse(b"\x7fELF\x02\x01\x01garbage").is_err());
    }
}
