//! The call script (`calls.txt` beside this crate's manifest): its grammar, parsed into data.
//!
//! A script has three sections. `[lifecycle]` lists init/shutdown entry points, each called with
//! the library uninitialised and followed by `nvmlShutdown`. `[not-compared]` names functions that
//! are deliberately left out, each with its reason. `[calls]` lists one call per line:
//! `<function> [-> str] <token>...`, tokens in the C argument order (see [`Token`]).

use std::fmt;

/// The script this crate ships.
pub const SHIPPED: &str = include_str!("../calls.txt");

/// A parsed script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Script {
    /// Entry points called uninitialised, each followed by `nvmlShutdown`.
    pub lifecycle: Vec<Call>,
    /// Functions left out of the comparison, with the reason.
    pub not_compared: Vec<(String, String)>,
    /// The calls.
    pub calls: Vec<Call>,
}

/// One line of the script.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The exported symbol.
    pub function: String,
    /// What the function returns.
    pub returns: Returns,
    /// Its arguments, in order.
    pub tokens: Vec<Token>,
}

/// What a function returns.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Returns {
    /// An `nvmlReturn_t`.
    Code,
    /// A `const char *` (`nvmlErrorString`).
    Str,
}

/// A scalar output's C type.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scalar {
    /// `unsigned int` (and enums).
    U32,
    /// `int`.
    I32,
    /// `unsigned long long`.
    U64,
}

/// Whether an output's value is compared or only its presence (a counter that grows with time).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Stability {
    /// Compared exactly.
    Stable,
    /// Varies with time: compared as "written or not".
    Varies,
}

/// One argument token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// Each device's handle.
    Dev,
    /// Each device's handle, as the second device of a pair.
    Dev2,
    /// Each device index, then the device count (out of range).
    Idx,
    /// Each device's UUID string.
    Uuid,
    /// Each device's PCI bus id string.
    BusId,
    /// Each of these `unsigned int` values.
    U32(Vec<u32>),
    /// An `unsigned long long` value.
    U64(u64),
    /// An `int` value.
    I32(i32),
    /// A fresh event set, freed after the call.
    Set,
    /// A fresh event set, freed by the call itself.
    SetConsumed,
    /// A NULL pointer.
    Null,
    /// `int count, nvmlFieldValue_t *values` with these field ids preset (a `~` after an id: its
    /// value varies with time, and only its presence is compared).
    Fields(Vec<(u32, Stability)>),
    /// A pointer to one scalar output.
    Out(Scalar, Stability),
    /// A pointer to an output struct of `size` bytes, its first `u32` preset to `version`.
    Obj {
        /// Bytes.
        size: usize,
        /// The version word, if the struct is versioned.
        version: Option<u32>,
    },
    /// `char *buffer, unsigned int length`.
    Str(usize),
    /// `char *buffer` alone.
    Buf(usize),
    /// A pointer to an in/out `unsigned int` preset to this value.
    Count(u32),
    /// A pointer to an output array of this many bytes.
    Arr(usize),
    /// A pointer to an output array of this many device handles.
    Devs(usize),
    /// A pointer to one output device handle.
    DevOut,
    /// A pointer to one output opaque handle (event set, GPM sample).
    OpaqueOut,
}

impl Token {
    /// Whether the token is an output pointer the misuse cases replace by NULL.
    pub fn is_output(&self) -> bool {
        matches!(
            self,
            Token::Fields(_)
                | Token::Out(..)
                | Token::Obj { .. }
                | Token::Str(_)
                | Token::Buf(_)
                | Token::Count(_)
                | Token::Arr(_)
                | Token::Devs(_)
                | Token::DevOut
                | Token::OpaqueOut
        )
    }
}

/// Why a script does not parse: the line and what is wrong with it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("calls script line {line}: {message}")]
pub struct ParseError {
    /// 1-based line number.
    pub line: usize,
    /// What is wrong.
    pub message: String,
}

#[derive(Clone, Copy, PartialEq, Eq)]
enum Section {
    None,
    Lifecycle,
    NotCompared,
    Calls,
}

/// Parses a script.
pub fn parse(text: &str) -> Result<Script, ParseError> {
    let mut script = Script {
        lifecycle: Vec::new(),
        not_compared: Vec::new(),
        calls: Vec::new(),
    };
    let mut section = Section::None;
    for (number, raw) in text.lines().enumerate() {
        let line = number + 1;
        let fail = |message: String| ParseError { line, message };
        let text = raw.trim();
        if text.is_empty() || text.starts_with('#') {
            continue;
        }
        section = match text {
            "[lifecycle]" => Section::Lifecycle,
            "[not-compared]" => Section::NotCompared,
            "[calls]" => Section::Calls,
            _ => {
                match section {
                    Section::None => return Err(fail(format!("`{text}` before any section"))),
                    Section::NotCompared => {
                        let (name, reason) = text
                            .split_once(' ')
                            .ok_or_else(|| fail(format!("`{text}`: a function and a reason")))?;
                        script
                            .not_compared
                            .push((name.into(), reason.trim().into()));
                    }
                    Section::Lifecycle => script.lifecycle.push(call(text).map_err(fail)?),
                    Section::Calls => script.calls.push(call(text).map_err(fail)?),
                }
                continue;
            }
        };
    }
    Ok(script)
}

fn call(text: &str) -> Result<Call, String> {
    let mut words = text.split_whitespace().peekable();
    let function = words.next().unwrap_or_default().to_owned();
    if !function.starts_with("nvml") {
        return Err(format!("`{function}` is not an NVML function"));
    }
    let mut returns = Returns::Code;
    if words.peek() == Some(&"->") {
        words.next();
        match words.next() {
            Some("str") => returns = Returns::Str,
            other => {
                return Err(format!(
                    "`-> {}`: only `-> str` exists",
                    other.unwrap_or("")
                ))
            }
        }
    }
    let tokens = words.map(token).collect::<Result<_, _>>()?;
    Ok(Call {
        function,
        returns,
        tokens,
    })
}

fn token(word: &str) -> Result<Token, String> {
    let (kind, value) = word.split_once(':').unwrap_or((word, ""));
    let size = || {
        value
            .parse::<usize>()
            .map_err(|_| format!("`{word}`: a byte count"))
    };
    Ok(match (kind, value) {
        ("dev", "") => Token::Dev,
        ("dev2", "") => Token::Dev2,
        ("idx", "") => Token::Idx,
        ("uuid", "") => Token::Uuid,
        ("busid", "") => Token::BusId,
        ("set", "") => Token::Set,
        ("set-consumed", "") => Token::SetConsumed,
        ("null", "") => Token::Null,
        ("dev-out", "") => Token::DevOut,
        ("opaque-out", "") => Token::OpaqueOut,
        ("u32", _) => Token::U32(values(value).map_err(|err| format!("`{word}`: {err}"))?),
        ("u64", _) => Token::U64(number(value).map_err(|err| format!("`{word}`: {err}"))?),
        ("i32", _) => Token::I32(value.parse().map_err(|_| format!("`{word}`: an int"))?),
        ("fields", _) => Token::Fields(fields(value).map_err(|err| format!("`{word}`: {err}"))?),
        ("out", _) => {
            let (scalar, stability) = match value.strip_suffix('~') {
                Some(scalar) => (scalar, Stability::Varies),
                None => (value, Stability::Stable),
            };
            let scalar = match scalar {
                "u32" => Scalar::U32,
                "i32" => Scalar::I32,
                "u64" => Scalar::U64,
                _ => return Err(format!("`{word}`: out:u32, out:i32 or out:u64")),
            };
            Token::Out(scalar, stability)
        }
        ("obj", _) => match value.split_once('@') {
            Some((size, version)) => Token::Obj {
                size: size
                    .parse()
                    .map_err(|_| format!("`{word}`: a byte count"))?,
                version: Some(
                    u32::try_from(number(version)?)
                        .map_err(|_| format!("`{word}`: a 32-bit version"))?,
                ),
            },
            None => Token::Obj {
                size: size()?,
                version: None,
            },
        },
        ("str", _) => Token::Str(size()?),
        ("buf", _) => Token::Buf(size()?),
        ("arr", _) => Token::Arr(size()?),
        ("devs", _) => Token::Devs(size()?),
        ("count", _) => Token::Count(value.parse().map_err(|_| format!("`{word}`: a count"))?),
        _ => return Err(format!("unknown token `{word}`")),
    })
}

/// `1,83~,94` → [(1, Stable), (83, Varies), (94, Stable)].
fn fields(text: &str) -> Result<Vec<(u32, Stability)>, String> {
    text.split(',')
        .map(|part| match part.strip_suffix('~') {
            Some(id) => Ok((narrow(number(id)?)?, Stability::Varies)),
            None => Ok((narrow(number(part)?)?, Stability::Stable)),
        })
        .collect()
}

/// `1,2,5-7` → [1, 2, 5, 6, 7].
fn values(text: &str) -> Result<Vec<u32>, String> {
    let mut out = Vec::new();
    for part in text.split(',') {
        match part.split_once('-') {
            Some((low, high)) => {
                let (low, high) = (narrow(number(low)?)?, narrow(number(high)?)?);
                if low > high {
                    return Err(format!("empty range {part}"));
                }
                out.extend(low..=high);
            }
            None => out.push(narrow(number(part)?)?),
        }
    }
    Ok(out)
}

fn narrow(value: u64) -> Result<u32, String> {
    u32::try_from(value).map_err(|_| format!("{value} does not fit 32 bits"))
}

fn number(text: &str) -> Result<u64, String> {
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| format!("`{text}` is not a number"))
}

impl fmt::Display for Token {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Token::Dev | Token::Dev2 => f.write_str("dev"),
            Token::Idx => f.write_str("idx"),
            Token::Uuid => f.write_str("uuid"),
            Token::BusId => f.write_str("busid"),
            Token::U32(values) => write!(f, "u32:{values:?}"),
            Token::U64(value) => write!(f, "u64:{value}"),
            Token::I32(value) => write!(f, "i32:{value}"),
            Token::Set => f.write_str("set"),
            Token::SetConsumed => f.write_str("set-consumed"),
            Token::Null => f.write_str("NULL"),
            Token::Fields(ids) => write!(f, "fields:{}", ids.len()),
            Token::Out(Scalar::U32, _) => f.write_str("out:u32"),
            Token::Out(Scalar::I32, _) => f.write_str("out:i32"),
            Token::Out(Scalar::U64, _) => f.write_str("out:u64"),
            Token::Obj { size, .. } => write!(f, "obj:{size}"),
            Token::Str(size) => write!(f, "str:{size}"),
            Token::Buf(size) => write!(f, "buf:{size}"),
            Token::Count(value) => write!(f, "count:{value}"),
            Token::Arr(size) => write!(f, "arr:{size}"),
            Token::Devs(count) => write!(f, "devs:{count}"),
            Token::DevOut => f.write_str("dev-out"),
            Token::OpaqueOut => f.write_str("opaque-out"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_shipped_script_parses_and_lists_each_call_once_per_argument_shape() {
        let script = parse(SHIPPED).expect("shipped script");
        assert!(script.calls.len() > 140, "{} calls", script.calls.len());
        assert_eq!(script.lifecycle.len(), 5);
        let mut seen = std::collections::HashSet::new();
        for call in &script.calls {
            let shape = format!("{} {:?}", call.function, call.tokens);
            assert!(seen.insert(shape.clone()), "listed twice: {shape}");
        }
    }

    #[test]
    fn tokens_parse_with_ranges_versions_and_volatility() {
        let script = parse(
            "[calls]\nnvmlX dev u32:0-2,7 obj:40@0x2000028 out:u64~ str:96\nnvmlErrorString -> str u32:1\nnvmlF dev fields:1,83~",
        )
        .expect("parses");
        assert_eq!(
            script.calls[0].tokens,
            vec![
                Token::Dev,
                Token::U32(vec![0, 1, 2, 7]),
                Token::Obj {
                    size: 40,
                    version: Some(0x0200_0028)
                },
                Token::Out(Scalar::U64, Stability::Varies),
                Token::Str(96),
            ]
        );
        assert_eq!(script.calls[1].returns, Returns::Str);
        assert_eq!(
            script.calls[2].tokens[1],
            Token::Fields(vec![(1, Stability::Stable), (83, Stability::Varies)])
        );
    }

    #[test]
    fn bad_lines_are_named_by_number() {
        let err = parse("[calls]\nnvmlX dev\nnvmlY frob").expect_err("unknown token");
        assert_eq!(err.line, 3);
        assert!(err.message.contains("frob"), "{err}");
        let err = parse("nvmlX dev").expect_err("no section");
        assert_eq!(err.line, 1);
        let err = parse("[calls]\nnvmlX u32:5-2").expect_err("empty range");
        assert!(err.message.contains("empty range"), "{err}");
        let err = parse("[not-compared]\nnvmlX").expect_err("no reason");
        assert!(err.message.contains("reason"), "{err}");
    }
}
