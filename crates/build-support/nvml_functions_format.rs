// The one owner of `crates/mock-nvml/nvml-functions.txt`'s line format, standard library only:
// `cargo xtask nvml-functions` writes the file with it (`xtask/src/nvml_functions/parse.rs`, also
// included by `tests/nvml_functions.rs`) and mock-nvml's `build.rs` reads it, both through
// `#[path]`, so the writer and the reader spell the same words.
//
// Lines: `function NAME RETURNS KIND...` (a function nvml.h declares), `upstream NAME RETURNS
// KIND...` (a name only upstream's mock exports, with its signature), `alias NAME TARGET` (NAME
// forwards to the header's TARGET); `#` starts a comment line; blank lines are ignored.

/// How a parameter reaches the function: which register class, and what a stub checks.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Kind {
    /// `nvmlDevice_t`: must be a handle the mock issued.
    Device,
    /// Any other opaque pointer handle (`nvmlGpuInstance_t`, `nvmlEventSet_t`, ...).
    Handle,
    /// Any pointer, `char *` included: must not be NULL.
    Ptr,
    /// An integer or enum of at most 8 bytes, in an integer register.
    Int,
    /// `float`, in a floating-point register.
    F32,
    /// `double`, in a floating-point register.
    F64,
}

/// Every kind, in the order the file's header comment names them.
const KINDS: [Kind; 6] = [
    Kind::Device,
    Kind::Handle,
    Kind::Ptr,
    Kind::Int,
    Kind::F32,
    Kind::F64,
];

impl Kind {
    /// The word the data file spells.
    pub fn word(self) -> &'static str {
        match self {
            Kind::Device => "device",
            Kind::Handle => "handle",
            Kind::Ptr => "ptr",
            Kind::Int => "int",
            Kind::F32 => "f32",
            Kind::F64 => "f64",
        }
    }

    /// The kind a word spells, if any.
    pub fn from_word(word: &str) -> Option<Kind> {
        KINDS.into_iter().find(|kind| kind.word() == word)
    }
}

/// What a function returns.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Returns {
    /// `nvmlReturn_t`.
    Code,
    /// `const char *` (`nvmlErrorString` only).
    Text,
}

impl Returns {
    /// The word the data file spells.
    pub fn word(self) -> &'static str {
        match self {
            Returns::Code => "return",
            Returns::Text => "string",
        }
    }

    /// The return a word spells, if any.
    pub fn from_word(word: &str) -> Option<Returns> {
        [Returns::Code, Returns::Text]
            .into_iter()
            .find(|returns| returns.word() == word)
    }
}

/// One C function: its name, return and parameter kinds in order.
#[derive(Clone, PartialEq, Eq, Debug)]
pub struct Function {
    /// The exported symbol.
    pub name: String,
    /// What it returns.
    pub returns: Returns,
    /// Its parameters, in order.
    pub params: Vec<Kind>,
}

impl Function {
    /// `NAME RETURNS KIND...`, as a `function` or `upstream` line spells it after its first word.
    pub fn signature_words(&self) -> String {
        let mut line = format!("{} {}", self.name, self.returns.word());
        for kind in &self.params {
            line.push(' ');
            line.push_str(kind.word());
        }
        line
    }
}

/// One meaningful line of the data file.
#[derive(Clone, PartialEq, Eq, Debug)]
pub enum Line {
    /// `function ...`: declared by nvml.h.
    Header(Function),
    /// `upstream ...`: exported by upstream's mock only, with its signature.
    Upstream(Function),
    /// `alias NAME TARGET`.
    Alias {
        /// The exported name.
        name: String,
        /// The header's function it forwards to.
        target: String,
    },
}

/// Reads one line: `Ok(None)` for a comment or blank line, `Err` with what is wrong otherwise.
pub fn parse_line(line: &str) -> Result<Option<Line>, String> {
    if line.starts_with('#') {
        return Ok(None);
    }
    let words: Vec<&str> = line.split_whitespace().collect();
    match words.as_slice() {
        [] => Ok(None),
        ["alias", name, target] => Ok(Some(Line::Alias {
            name: (*name).to_owned(),
            target: (*target).to_owned(),
        })),
        [section @ ("function" | "upstream"), name, returns, kinds @ ..] => {
            let returns = Returns::from_word(returns)
                .ok_or_else(|| format!("unknown return `{returns}` in `{line}`"))?;
            let params = kinds
                .iter()
                .map(|word| {
                    Kind::from_word(word)
                        .ok_or_else(|| format!("unknown parameter kind `{word}` in `{line}`"))
                })
                .collect::<Result<Vec<Kind>, String>>()?;
            let function = Function {
                name: (*name).to_owned(),
                returns,
                params,
            };
            Ok(Some(match *section {
                "function" => Line::Header(function),
                _ => Line::Upstream(function),
            }))
        }
        _ => Err(format!("cannot read `{line}`")),
    }
}
