//! Gives the cdylib the real library's SONAME, so that it installs as `libnvidia-ml.so.1`, and
//! links GCC's unwinder into it statically, so that `dlopen` loads no `libgcc_s.so.1`
//! (`crates/build-support/static_unwinder.rs`).
//!
//! Generates the stubs: for every function of `nvml-functions.txt` (the data file
//! `cargo xtask nvml-functions` writes) that `src/ffi/exports.rs` (EXPORTS, the hand-written
//! exports) does not list, `$OUT_DIR/stubs.rs` defines an export that calls `ffi::stubs::stub`,
//! or, for an `alias` line, forwards to its target. `$OUT_DIR/stub_names.rs` lists them
//! (`STUBS`, `ALIASES`, `HEADER_FUNCTIONS`), `$OUT_DIR/stub_calls.rs` is the unit tests' table.

include!("../build-support/static_unwinder.rs");

#[path = "src/ffi/exports.rs"]
mod exports;

use std::fmt::Write as _;

/// The data file, relative to the crate.
const DATA_FILE: &str = "nvml-functions.txt";

fn main() {
    println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libnvidia-ml.so.1");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed=../build-support/static_unwinder.rs");
    println!("cargo:rerun-if-changed={DATA_FILE}");
    println!("cargo:rerun-if-changed=src/ffi/exports.rs");
    static_unwinder();
    generate_stubs();
}

#[path = "../build-support/nvml_functions_format.rs"]
#[allow(dead_code)] // the writer's half (`word`, `signature_words`) is xtask's
mod format;

use format::{Function, Kind, Line, Returns};

/// What the stubs need of a kind beyond its word.
trait KindExt {
    fn rust_type(self) -> &'static str;
    fn stub_arg(self, a: &str) -> String;
    fn test_arg(self) -> &'static str;
}

impl KindExt for Kind {
    /// The Rust type of a parameter of this kind (an integer of at most 8 bytes arrives in an
    /// integer register or an 8-byte stack slot, so `u64` reads any of them).
    fn rust_type(self) -> &'static str {
        match self {
            Kind::Device => "nvmlDevice_t",
            Kind::Handle | Kind::Ptr => "*mut c_void",
            Kind::Int => "u64",
            Kind::F32 => "f32",
            Kind::F64 => "f64",
        }
    }

    /// How the stub helper sees an argument `a`.
    fn stub_arg(self, a: &str) -> String {
        match self {
            Kind::Device => format!("Arg::Device({a})"),
            Kind::Handle => "Arg::Handle".to_owned(),
            Kind::Ptr => format!("Arg::Ptr({a})"),
            Kind::Int | Kind::F32 | Kind::F64 => "Arg::Value".to_owned(),
        }
    }

    /// The test table's argument of this kind.
    fn test_arg(self) -> &'static str {
        match self {
            Kind::Device => "device",
            Kind::Handle => "buffers.handle()",
            Kind::Ptr => "buffers.ptr(mode) as _",
            Kind::Int => "0 as _",
            Kind::F32 | Kind::F64 => "0.0",
        }
    }
}

/// The data file, read: header functions, upstream-only stubs, aliases (name, target).
struct Data {
    header: Vec<Function>,
    upstream: Vec<Function>,
    aliases: Vec<(String, String)>,
}

fn read_data() -> Data {
    let text = std::fs::read_to_string(DATA_FILE)
        .unwrap_or_else(|err| panic!("reading {DATA_FILE}: {err}"));
    let mut data = Data {
        header: Vec::new(),
        upstream: Vec::new(),
        aliases: Vec::new(),
    };
    for line in text.lines() {
        match format::parse_line(line).unwrap_or_else(|err| panic!("{DATA_FILE}: {err}")) {
            None => {}
            Some(Line::Alias { name, target }) => data.aliases.push((name, target)),
            Some(Line::Header(function) | Line::Upstream(function))
                if function.returns != Returns::Code
                    && !exports::EXPORTS.contains(&function.name.as_str()) =>
            {
                panic!(
                    "{} returns `{}`: it must be hand-written (list it in EXPORTS)",
                    function.name,
                    function.returns.word()
                );
            }
            Some(Line::Header(function)) => data.header.push(function),
            Some(Line::Upstream(function)) => data.upstream.push(function),
        }
    }
    data
}

/// `a0: T0, a1: T1, ...`, a parameter unused by the stub named `_aN`.
fn parameters(params: &[Kind], used: impl Fn(Kind) -> bool) -> String {
    let list: Vec<String> = params
        .iter()
        .enumerate()
        .map(|(index, kind)| {
            let prefix = if used(*kind) { "" } else { "_" };
            format!("{prefix}a{index}: {}", kind.rust_type())
        })
        .collect();
    list.join(", ")
}

fn write_stub(out: &mut String, function: &Function) {
    let name = &function.name;
    let args: Vec<String> = (function.params.iter().enumerate())
        .map(|(index, kind)| kind.stub_arg(&format!("a{index}")))
        .collect();
    let params = parameters(&function.params, |kind| {
        matches!(kind, Kind::Device | Kind::Ptr)
    });
    let _ = write!(
        out,
        "/// `{name}`: a generated stub, NOT_SUPPORTED after the argument checks ([`stub`]).\n\
         ///\n\
         /// # Safety\n\
         /// Any arguments: pointers are only compared with NULL, never read or written.\n\
         #[no_mangle]\n\
         pub unsafe extern \"C\" fn {name}({params}) -> NvmlReturn {{\n    \
             stub(&[{}])\n\
         }}\n\n",
        args.join(", ")
    );
}

fn write_alias(out: &mut String, name: &str, target: &Function) {
    let params = parameters(&target.params, |_| true);
    let args: Vec<String> = (0..target.params.len())
        .map(|index| format!("a{index} as _"))
        .collect();
    let target = &target.name;
    let _ = write!(
        out,
        "/// `{name}`: forwards to [`{target}`](crate::ffi::{target}) (the unversioned symbol is \
         version 1).\n\
         ///\n\
         /// # Safety\n\
         /// As `{target}`'s.\n\
         #[no_mangle]\n\
         #[allow(unused_unsafe, clippy::unnecessary_cast)]\n\
         pub unsafe extern \"C\" fn {name}({params}) -> NvmlReturn {{\n    \
             // SAFETY: the caller's arguments, forwarded unchanged under {target}'s contract.\n    \
             unsafe {{ crate::ffi::{target}({}) }}\n\
         }}\n\n",
        args.join(", ")
    );
}

/// `("name", |device, mode| ...)`: a call of `name` with arguments of `params`' kinds.
fn write_call(out: &mut String, name: &str, params: &[Kind]) {
    let args: Vec<&str> = params.iter().map(|kind| kind.test_arg()).collect();
    let _ = write!(
        out,
        "    |device, mode| {{\n        \
             let _ = (device, mode);\n        \
             let mut buffers = Buffers::default();\n        \
             let _ = &mut buffers;\n        \
             // SAFETY: every pointer is NULL or one of `buffers`' zeroed 4 KiB blocks.\n        \
             #[allow(unused_unsafe, clippy::unnecessary_cast)]\n        \
             unsafe {{ crate::ffi::{name}({}) }}\n    \
         }},\n",
        args.join(", ")
    );
}

fn list(out: &mut String, doc: &str, name: &str, items: &[String]) {
    let _ = writeln!(out, "/// {doc}\npub const {name}: &[&str] = &[");
    for item in items {
        let _ = writeln!(out, "    {item:?},");
    }
    out.push_str("];\n\n");
}

/// Writes a stub for each data-file function that is not hand-written, and its test-table row;
/// returns their names.
fn write_stubs(data: &Data, stubs: &mut String, calls: &mut String) -> Vec<String> {
    let mut stub_names = Vec::new();
    for function in data.header.iter().chain(&data.upstream) {
        if exports::EXPORTS.contains(&function.name.as_str()) {
            continue;
        }
        if stub_names.contains(&function.name) {
            panic!("{DATA_FILE}: {} is listed twice", function.name);
        }
        write_stub(stubs, function);
        let takes = |kind| function.params.contains(&kind);
        let _ = writeln!(
            calls,
            "  StubCall {{ name: {:?}, device: {}, handle: {}, ptr: {}, call:",
            function.name,
            takes(Kind::Device),
            takes(Kind::Handle),
            takes(Kind::Ptr)
        );
        write_call(calls, &function.name, &function.params);
        calls.push_str("  },\n");
        stub_names.push(function.name.clone());
    }
    stub_names
}

/// Writes a forwarding export for each alias that is not hand-written, and its test-table row;
/// returns their names.
fn write_aliases(data: &Data, stubs: &mut String, calls: &mut String) -> Vec<String> {
    let mut alias_names = Vec::new();
    for (name, target) in &data.aliases {
        if exports::EXPORTS.contains(&name.as_str()) {
            continue;
        }
        let target = data
            .header
            .iter()
            .find(|function| &function.name == target)
            .unwrap_or_else(|| {
                panic!("{DATA_FILE}: alias {name}'s target {target} is no function")
            });
        write_alias(stubs, name, target);
        let _ = writeln!(calls, "  ({name:?}, {:?},", target.name);
        write_call(calls, name, &target.params);
        write_call(calls, &target.name, &target.params);
        calls.push_str("  ),\n");
        alias_names.push(name.clone());
    }
    alias_names
}

fn generate_stubs() {
    let data = read_data();
    let mut stubs =
        String::from("// Generated by build.rs from nvml-functions.txt; do not edit.\n\n");
    let mut calls = String::from(
        "// Generated by build.rs from nvml-functions.txt; do not edit.\n\n\
         /// Every generated stub: name, which checks apply, a call with arguments of its kinds.\n\
         const STUB_CALLS: &[StubCall] = &[\n",
    );
    let stub_names = write_stubs(&data, &mut stubs, &mut calls);
    calls.push_str(
        "];\n\n/// Every generated alias: name, target, a call of each with the same arguments.\n\
         const ALIAS_CALLS: &[(&str, &str, Caller, Caller)] = &[\n",
    );
    let alias_names = write_aliases(&data, &mut stubs, &mut calls);
    calls.push_str("];\n");
    let mut names =
        String::from("// Generated by build.rs from nvml-functions.txt; do not edit.\n\n");
    list(
        &mut names,
        "Every generated stub, in the data file's order.",
        "STUBS",
        &stub_names,
    );
    list(
        &mut names,
        "Every generated alias.",
        "ALIASES",
        &alias_names,
    );
    let header: Vec<String> = data
        .header
        .iter()
        .map(|function| function.name.clone())
        .collect();
    list(
        &mut names,
        "Every function nvml.h declares.",
        "HEADER_FUNCTIONS",
        &header,
    );
    let out_dir = std::path::PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    for (file, text) in [
        ("stubs.rs", stubs),
        ("stub_calls.rs", calls),
        ("stub_names.rs", names),
    ] {
        std::fs::write(out_dir.join(file), text)
            .unwrap_or_else(|err| panic!("writing {file}: {err}"));
    }
}
