//! Pure: NVIDIA's `nvml.h` and upstream's Go bridge (`//export` functions) to the mock's function
//! list, `crates/mock-nvml/nvml-functions.txt`, and upstream's export list.
//!
//! Standard library only: `tests/nvml_functions.rs` includes this file by path, so that the
//! real-peer test and `cargo xtask nvml-functions` parse and render with the same code. The data
//! file's words and lines are `crates/build-support/nvml_functions_format.rs`'s, which mock-nvml's
//! `build.rs` reads with.

use std::collections::{BTreeSet, HashMap};
use std::fmt::Write as _;

#[path = "../../../crates/build-support/nvml_functions_format.rs"]
#[allow(dead_code)] // the reader's half (`parse_line`) is mock-nvml's `build.rs`'s; tests use it
mod format;

pub use format::{Function, Kind, Returns};

/// How a named type is passed, from the header's typedefs.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum TypeClass {
    /// A pointer typedef (`typedef struct nvmlX_st *nvmlX_t`).
    Handle,
    Int,
    F32,
    F64,
    /// A struct or union: cannot be classified when passed by value.
    Aggregate,
}

/// The header's typedefs: name to class.
pub struct Types(HashMap<String, TypeClass>);

/// The header: its functions in declaration order and its typedefs.
pub struct Header {
    /// Every `DECLDIR` function, in the header's order.
    pub functions: Vec<Function>,
    /// The typedefs, for classifying upstream's Go parameter types.
    pub types: Types,
}

/// Removes comments and preprocessor lines (with their continuations) from C text.
fn strip_c(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(['/', '"']) {
        out.push_str(&rest[..at]);
        let tail = &rest[at..];
        if let Some(after) = tail.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |end| &after[end + 2..]);
            out.push(' ');
        } else if tail.starts_with("//") {
            rest = tail.find('\n').map_or("", |end| &tail[end..]);
        } else if let Some(after) = tail.strip_prefix('"') {
            // A string literal, copied whole (a `//` inside is not a comment).
            let end = after.find('"').map_or(after.len(), |end| end + 1);
            out.push_str(&tail[..=end]);
            rest = &after[end..];
        } else {
            out.push('/');
            rest = &tail[1..];
        }
    }
    out.push_str(rest);
    let mut kept = String::with_capacity(out.len());
    let mut continued = false;
    for line in out.lines() {
        let directive = continued || line.trim_start().starts_with('#');
        continued = directive && line.trim_end().ends_with('\\');
        if !directive {
            kept.push_str(line);
            kept.push('\n');
        }
    }
    kept.replace("extern \"C\" {", " ")
}

/// Splits C text into top-level statements (`;` outside braces), whitespace collapsed.
fn statements(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    let mut depth = 0usize;
    for c in text.chars() {
        match c {
            '{' => depth += 1,
            // The `}` closing `extern "C" {` (whose opening `strip_c` removed) is dropped.
            '}' if depth == 0 => continue,
            '}' => depth -= 1,
            ';' if depth == 0 => {
                out.push(current.split_whitespace().collect::<Vec<_>>().join(" "));
                current.clear();
                continue;
            }
            _ => {}
        }
        current.push(c);
    }
    out
}

/// Removes every `DEPRECATED(...)` marker.
fn drop_deprecated(statement: &str) -> String {
    let mut text = statement.to_owned();
    while let Some(at) = text.find("DEPRECATED(") {
        let end = text[at..].find(')').map_or(text.len(), |end| at + end + 1);
        text.replace_range(at..end, " ");
    }
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn is_ident(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The class of a C base type spelled without pointer (`unsigned int`, `nvmlFoo_t`).
fn base_class(spelled: &str, types: &Types) -> Option<TypeClass> {
    let words: Vec<&str> = spelled
        .split_whitespace()
        .filter(|word| *word != "const")
        .collect();
    let integers = [
        "char", "short", "int", "long", "unsigned", "signed", "int8_t", "uint8_t", "int16_t",
        "uint16_t", "int32_t", "uint32_t", "int64_t", "uint64_t", "size_t",
    ];
    match words.as_slice() {
        ["float"] => Some(TypeClass::F32),
        ["double"] => Some(TypeClass::F64),
        ["struct" | "union", ..] => Some(TypeClass::Aggregate),
        [one] if types.0.contains_key(*one) => types.0.get(*one).copied(),
        words if !words.is_empty() && words.iter().all(|word| integers.contains(word)) => {
            Some(TypeClass::Int)
        }
        _ => None,
    }
}

/// Whether a struct body (`{ ... }`) has exactly one member, a pointer.
fn is_one_pointer(body: &str) -> bool {
    let inner = body.trim().trim_start_matches('{').trim_end_matches('}');
    let members: Vec<&str> = inner
        .split(';')
        .map(str::trim)
        .filter(|member| !member.is_empty())
        .collect();
    matches!(members.as_slice(), [one] if one.contains('*') && !one.contains(['{', '(']))
}

/// Records one `typedef` statement.
fn add_typedef(statement: &str, types: &mut Types) -> Result<(), String> {
    let body = statement.trim_start_matches("typedef").trim();
    let name_start = body.trim_end_matches(is_ident).len();
    let name = body[name_start..].to_owned();
    let spelled = body[..name_start].trim();
    let class = if let Some(brace) = spelled.find('{') {
        match spelled[..brace].split_whitespace().next() {
            Some("enum") => TypeClass::Int,
            // go-nvml's nvml.h wraps each handle in a one-pointer struct (`typedef struct {
            // struct nvmlDevice_st* handle; } nvmlDevice_t;`), passed exactly as the pointer.
            Some("struct") if is_one_pointer(&spelled[brace..]) => TypeClass::Handle,
            Some("struct" | "union") => TypeClass::Aggregate,
            other => return Err(format!("typedef {name}: unknown aggregate {other:?}")),
        }
    } else if spelled.contains('*') {
        TypeClass::Handle
    } else {
        base_class(spelled, types)
            .ok_or_else(|| format!("typedef {name}: cannot classify `{spelled}`"))?
    };
    types.0.insert(name, class);
    Ok(())
}

/// The kind of one C parameter (`const char *name`, `nvmlDevice_t device`, `unsigned int n`).
fn c_param_kind(param: &str, types: &Types, function: &str) -> Result<Kind, String> {
    if param.contains('*') || param.contains('[') {
        return Ok(Kind::Ptr);
    }
    let spelled = param.trim_end_matches(is_ident).trim();
    if spelled.split_whitespace().last() == Some("nvmlDevice_t") {
        return Ok(Kind::Device);
    }
    match base_class(spelled, types) {
        Some(TypeClass::Handle) => Ok(Kind::Handle),
        Some(TypeClass::Int) => Ok(Kind::Int),
        Some(TypeClass::F32) => Ok(Kind::F32),
        Some(TypeClass::F64) => Ok(Kind::F64),
        Some(TypeClass::Aggregate) => Err(format!(
            "{function}: parameter `{param}` passes a struct or union by value, which the stubs cannot classify"
        )),
        None => Err(format!(
            "{function}: cannot classify parameter `{param}`"
        )),
    }
}

/// One `DECLDIR` declaration.
fn parse_declaration(statement: &str, types: &Types) -> Result<Function, String> {
    let open = statement
        .find('(')
        .ok_or_else(|| format!("no parameter list in `{statement}`"))?;
    let close = statement
        .rfind(')')
        .ok_or_else(|| format!("unclosed parameter list in `{statement}`"))?;
    let head = statement[..open].trim_end();
    let name = head[head.trim_end_matches(is_ident).len()..].to_owned();
    let prefix = head[..head.len() - name.len()].replace("DECLDIR", " ");
    let prefix: Vec<&str> = prefix.split_whitespace().collect();
    let returns = match prefix.as_slice() {
        ["nvmlReturn_t"] => Returns::Code,
        ["const", "char*"] | ["const", "char", "*"] => Returns::Text,
        other => return Err(format!("{name}: unknown return type {other:?}")),
    };
    let list = statement[open + 1..close].trim();
    let params = if list.is_empty() || list == "void" {
        Vec::new()
    } else {
        list.split(',')
            .map(|param| c_param_kind(param.trim(), types, &name))
            .collect::<Result<_, _>>()?
    };
    Ok(Function {
        name,
        returns,
        params,
    })
}

/// Parses `nvml.h`: every `DECLDIR` function (those under `NVML_NO_UNVERSIONED_FUNC_DEFS`
/// included: they are the unversioned symbols the library exports) and the typedefs.
pub fn parse_header(text: &str) -> Result<Header, String> {
    let mut types = Types(HashMap::new());
    let mut functions = Vec::new();
    let mut seen = BTreeSet::new();
    for statement in statements(&strip_c(text)) {
        let statement = drop_deprecated(&statement);
        if statement.starts_with("typedef ") {
            add_typedef(&statement, &mut types)?;
        } else if statement.contains("DECLDIR") {
            let function = parse_declaration(&statement, &types)?;
            if !seen.insert(function.name.clone()) {
                return Err(format!("{} is declared twice", function.name));
            }
            functions.push(function);
        }
    }
    if functions.is_empty() {
        return Err("no DECLDIR function declarations: is this nvml.h?".to_owned());
    }
    Ok(Header { functions, types })
}

/// The kind of one Go parameter type of upstream's bridge (`C.nvmlDevice_t`, `*C.uint`).
fn go_param_kind(spelled: &str, types: &Types, function: &str) -> Result<Kind, String> {
    if spelled.starts_with('*') || spelled == "unsafe.Pointer" || spelled == "uintptr" {
        return Ok(Kind::Ptr);
    }
    let c_name = spelled
        .strip_prefix("C.")
        .ok_or_else(|| format!("{function}: cannot classify Go parameter type `{spelled}`"))?;
    let c_spelled = match c_name {
        "uint" => "unsigned int",
        "ulong" => "unsigned long",
        "ulonglong" => "unsigned long long",
        "longlong" => "long long",
        "uchar" => "unsigned char",
        "ushort" => "unsigned short",
        "schar" => "signed char",
        other => other,
    };
    c_param_kind(&format!("{c_spelled} value"), types, function)
}

/// Parses upstream's bridge sources: every `//export`ed function whose name starts with `nvml`,
/// with its Go signature classified through the header's typedefs. Sorted by name.
pub fn parse_bridge(files: &[(String, String)], types: &Types) -> Result<Vec<Function>, String> {
    let mut out = Vec::new();
    for (file, text) in files {
        let mut lines = text.lines();
        while let Some(line) = lines.next() {
            let Some(name) = line.strip_prefix("//export ").map(str::trim) else {
                continue;
            };
            if !name.starts_with("nvml") {
                continue;
            }
            // Lint comments may stand between `//export` and its func.
            let signature = lines
                .by_ref()
                .find(|next| !next.starts_with("//"))
                .filter(|next| next.starts_with(&format!("func {name}(")))
                .ok_or_else(|| format!("{file}: //export {name} is not followed by its func"))?;
            out.push(parse_go_func(name, signature, types)?);
        }
    }
    out.sort_by(|a, b| a.name.cmp(&b.name));
    Ok(out)
}

/// One `func name(a C.x, b, c *C.y) C.nvmlReturn_t {` line.
fn parse_go_func(name: &str, line: &str, types: &Types) -> Result<Function, String> {
    let open = line.find('(').unwrap_or(0);
    let close = line
        .rfind(')')
        .filter(|close| *close > open)
        .ok_or_else(|| format!("{name}: cannot read `{line}`"))?;
    let returns = match line[close + 1..].trim().trim_end_matches('{').trim() {
        "C.nvmlReturn_t" => Returns::Code,
        "*C.char" => Returns::Text,
        other => return Err(format!("{name}: unknown Go return type `{other}`")),
    };
    let mut spelled: Vec<Option<String>> = Vec::new();
    for param in line[open + 1..close].split(',').map(str::trim) {
        if param.is_empty() {
            continue;
        }
        spelled.push(param.split_once(' ').map(|(_, ty)| ty.trim().to_owned()));
    }
    // Go's `a, b C.uint`: an untyped name takes the type of the next typed one.
    let mut next = None;
    for slot in spelled.iter_mut().rev() {
        match slot {
            Some(ty) => next = Some(ty.clone()),
            None => slot.clone_from(&next),
        }
    }
    let params = spelled
        .into_iter()
        .map(|ty| {
            let ty = ty.ok_or_else(|| format!("{name}: a parameter without a type"))?;
            go_param_kind(&ty, types, name)
        })
        .collect::<Result<_, _>>()?;
    Ok(Function {
        name: name.to_owned(),
        returns,
        params,
    })
}

/// What the mock exports beyond the header for a name upstream exports.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Extra {
    /// `name_v1` of a function the header declares unversioned with the same signature: the
    /// unversioned symbol is version 1, so `name_v1` forwards to it.
    Alias {
        /// The exported alias.
        name: String,
        /// The header's function it forwards to.
        target: String,
    },
    /// A stub with upstream's signature.
    Upstream(Function),
}

/// The names upstream exports that the header does not declare, as aliases or stubs.
pub fn extras(header: &[Function], upstream: &[Function]) -> Vec<Extra> {
    let declared: HashMap<&str, &Function> = header
        .iter()
        .map(|function| (function.name.as_str(), function))
        .collect();
    upstream
        .iter()
        .filter(|function| !declared.contains_key(function.name.as_str()))
        .map(|function| {
            let target = function
                .name
                .strip_suffix("_v1")
                .and_then(|base| declared.get(base))
                .filter(|target| {
                    target.params == function.params && target.returns == function.returns
                });
            match target {
                Some(target) => Extra::Alias {
                    name: function.name.clone(),
                    target: target.name.clone(),
                },
                None => Extra::Upstream(function.clone()),
            }
        })
        .collect()
}

/// The first line of the data file's extras: everything before it comes from the header.
pub const EXTRAS_MARKER: &str = "# ---- names upstream's mock exports that nvml.h does not declare";

/// The header part of `nvml-functions.txt` (up to and including [`EXTRAS_MARKER`]).
pub fn render_header_part(go_nvml: &str, header: &[Function]) -> String {
    let mut out = format!(
        "# The NVML functions the mock libnvidia-ml.so.1 exports. Generated by\n\
         # `cargo xtask nvml-functions` (xtask/src/nvml_functions.rs); do not edit.\n\
         # `function` lines: every function github.com/NVIDIA/go-nvml@{go_nvml} pkg/nvml/nvml.h\n\
         # declares, in its order: name, return (`return` nvmlReturn_t, `string` const char *),\n\
         # parameter kinds in order (device, handle, ptr, int, f32, f64).\n\
         # crates/mock-nvml/build.rs generates a NOT_SUPPORTED stub for each one that\n\
         # src/ffi/exports.rs (EXPORTS) does not list.\n"
    );
    for function in header {
        let _ = writeln!(out, "function {}", function.signature_words());
    }
    out.push_str(EXTRAS_MARKER);
    out.push('\n');
    out
}

/// The extras part of `nvml-functions.txt` (after [`EXTRAS_MARKER`]).
pub fn render_extras_part(snapshot: &str, extras: &[Extra]) -> String {
    let mut out = format!(
        "# From upstream's mock ({snapshot}, pkg/gpu/mocknvml/bridge, `//export` lines).\n\
         # `alias NAME TARGET`: NAME forwards to the header's TARGET (the unversioned symbol is v1).\n\
         # `upstream NAME ...`: a stub with the signature upstream gives it.\n"
    );
    for extra in extras {
        let _ = match extra {
            Extra::Alias { name, target } => writeln!(out, "alias {name} {target}"),
            Extra::Upstream(function) => {
                writeln!(out, "upstream {}", function.signature_words())
            }
        };
    }
    out
}

/// Splits a data file into its header part (through [`EXTRAS_MARKER`]) and its extras part.
pub fn split_data(text: &str) -> (&str, &str) {
    match text.find(EXTRAS_MARKER) {
        Some(at) => {
            let end = at + EXTRAS_MARKER.len() + 1;
            text.split_at(end.min(text.len()))
        }
        None => (text, ""),
    }
}

/// `crates/mock-nvml/tests/upstream-exports.txt`: upstream's `nvml*` exports, one a line.
pub fn render_upstream_exports(snapshot: &str, upstream: &[Function]) -> String {
    let mut out = format!(
        "# Every nvml* symbol upstream's mock exports: NVIDIA k8s-test-infra's snapshot {snapshot},\n\
         # pkg/gpu/mocknvml/bridge/*.go, the `//export` lines (its mockInternal* exports left out).\n\
         # Generated by `cargo xtask nvml-functions`; tests/exports.rs checks the mock exports them all.\n"
    );
    for function in upstream {
        out.push_str(&function.name);
        out.push('\n');
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::format::{parse_line, Line};
    use super::*;

    /// What `render_*_part` writes, `build.rs`'s reader reads back as the same functions.
    #[test]
    fn the_reader_reads_what_the_writer_writes() {
        let function = |name: &str, returns, params: &[Kind]| Function {
            name: name.to_owned(),
            returns,
            params: params.to_vec(),
        };
        let header = vec![
            function("nvmlInit_v2", Returns::Code, &[]),
            function("nvmlErrorString", Returns::Text, &[Kind::Int]),
            function(
                "nvmlDeviceSetFanSpeed_v2",
                Returns::Code,
                &[Kind::Device, Kind::Int, Kind::Int],
            ),
            function(
                "nvmlGpmSampleGet",
                Returns::Code,
                &[Kind::Device, Kind::Handle, Kind::Ptr, Kind::F32, Kind::F64],
            ),
        ];
        let upstream_only = function("nvmlDeviceGetMockThing", Returns::Code, &[Kind::Ptr]);
        let extras = vec![
            Extra::Alias {
                name: "nvmlInit_v1".to_owned(),
                target: "nvmlInit_v2".to_owned(),
            },
            Extra::Upstream(upstream_only.clone()),
        ];
        let text =
            render_header_part("v0.13.0-1", &header) + &render_extras_part("3b2b865d", &extras);
        let lines: Vec<Line> = text
            .lines()
            .filter_map(|line| parse_line(line).unwrap_or_else(|err| panic!("{err}")))
            .collect();
        let mut expected: Vec<Line> = header.into_iter().map(Line::Header).collect();
        expected.push(Line::Alias {
            name: "nvmlInit_v1".to_owned(),
            target: "nvmlInit_v2".to_owned(),
        });
        expected.push(Line::Upstream(upstream_only));
        assert_eq!(lines, expected);
    }

    #[test]
    fn the_reader_names_what_it_cannot_read() {
        let err = parse_line("function nvmlX return device float").unwrap_err();
        assert!(err.contains("unknown parameter kind `float`"), "{err}");
        let err = parse_line("function nvmlX void").unwrap_err();
        assert!(err.contains("unknown return `void`"), "{err}");
        let err = parse_line("alias nvmlX").unwrap_err();
        assert!(err.contains("cannot read `alias nvmlX`"), "{err}");
        assert_eq!(parse_line("# a comment"), Ok(None));
        assert_eq!(parse_line("   "), Ok(None));
    }
}
