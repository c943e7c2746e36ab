//! From the script to the ordered list of cases one run makes: every combination of the iterated
//! tokens on every device, then each call's misuse cases. Pure: the runner supplies the device
//! count it found, and both libraries get the same list when they have the same count.

use std::fmt::Write as _;

use crate::script::{Call, Returns, Script, Token};

/// One argument as called.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Arg {
    /// Device `i`'s handle.
    Device(usize),
    /// A pointer to readable memory that is no handle the library issued.
    ForeignDevice,
    /// An index (may be out of range).
    Index(u32),
    /// Device `i`'s UUID string.
    Uuid(usize),
    /// Device `i`'s PCI bus id string.
    BusId(usize),
    /// A string no device has (before init).
    Unknown,
    /// An `unsigned int`.
    U32(u32),
    /// An `unsigned long long`.
    U64(u64),
    /// An `int`.
    I32(i32),
    /// NULL, where the script says so.
    Null,
    /// An output pointer the misuse case replaced by NULL (a string keeps its length).
    NulledOut(Token),
    /// A string buffer whose declared length is shorter than the buffer.
    Short(usize),
    /// Any other token, as written.
    Token(Token),
}

/// Which kind of case this is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Before `nvmlInit`: device arguments are foreign.
    BeforeInit,
    /// A lifecycle entry point, then `nvmlShutdown`.
    Lifecycle,
    /// With the library initialised.
    Initialised,
}

/// One call, ready to make.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Case {
    /// Stable name: function and arguments as the report shows them.
    pub id: String,
    /// The exported symbol.
    pub function: String,
    /// What the function returns.
    pub returns: Returns,
    /// The arguments.
    pub args: Vec<Arg>,
    /// When it runs.
    pub phase: Phase,
}

/// The cases made with the library uninitialised: each call's first combination with foreign
/// handles, then the lifecycle entry points.
pub fn uninitialised(script: &Script) -> Vec<Case> {
    let mut cases: Vec<Case> = script
        .calls
        .iter()
        .filter_map(|call| {
            combinations(call, 0)
                .into_iter()
                .next()
                .map(|args| (call, args))
        })
        .map(|(call, args)| {
            let args = args.into_iter().map(uninitialised_arg).collect();
            case(call, args, Phase::BeforeInit)
        })
        .collect();
    cases.dedup_by(|a, b| a.id == b.id);
    cases.extend(
        script
            .lifecycle
            .iter()
            .map(|call| case(call, combinations(call, 0).remove(0), Phase::Lifecycle)),
    );
    cases
}

/// The cases made with `devices` GPUs initialised: every combination, then the misuse cases.
pub fn initialised(script: &Script, devices: usize) -> Vec<Case> {
    let mut cases = Vec::new();
    for call in &script.calls {
        let all = combinations(call, devices);
        for args in &all {
            cases.push(case(call, args.clone(), Phase::Initialised));
        }
        if let Some(first) = all.first() {
            cases.extend(misuse(call, first));
        }
    }
    cases
}

fn uninitialised_arg(arg: Arg) -> Arg {
    match arg {
        Arg::Device(_) => Arg::ForeignDevice,
        Arg::Uuid(_) | Arg::BusId(_) => Arg::Unknown,
        other => other,
    }
}

/// NULL for each output, a one-byte length for each string, a foreign handle for the first device.
fn misuse(call: &Call, first: &[Arg]) -> Vec<Case> {
    let mut out = Vec::new();
    for (position, token) in call.tokens.iter().enumerate() {
        if token.is_output() {
            let mut args = first.to_vec();
            args[position] = Arg::NulledOut(token.clone());
            out.push(case(call, args, Phase::Initialised));
        }
        if let Token::Str(size) = token {
            let mut args = first.to_vec();
            args[position] = Arg::Short(*size);
            out.push(case(call, args, Phase::Initialised));
        }
    }
    if let Some(position) = first.iter().position(|arg| matches!(arg, Arg::Device(_))) {
        let mut args = first.to_vec();
        args[position] = Arg::ForeignDevice;
        out.push(case(call, args, Phase::Initialised));
    }
    out
}

/// Every combination of the call's iterated tokens, the first token varying slowest.
fn combinations(call: &Call, devices: usize) -> Vec<Vec<Arg>> {
    let mut all: Vec<Vec<Arg>> = vec![Vec::new()];
    for token in &call.tokens {
        let choices = choices(token, devices);
        all = all
            .into_iter()
            .flat_map(|prefix| {
                choices.iter().map(move |choice| {
                    let mut next = prefix.clone();
                    next.push(choice.clone());
                    next
                })
            })
            .collect();
    }
    all
}

fn choices(token: &Token, devices: usize) -> Vec<Arg> {
    let each = |make: fn(usize) -> Arg| (0..devices.max(1)).map(make).collect();
    match token {
        Token::Dev | Token::Dev2 => each(Arg::Device),
        Token::Uuid => each(Arg::Uuid),
        Token::BusId => each(Arg::BusId),
        Token::Idx => (0..=u32::try_from(devices).unwrap_or(u32::MAX))
            .map(Arg::Index)
            .collect(),
        Token::U32(values) => values.iter().copied().map(Arg::U32).collect(),
        Token::U64(value) => vec![Arg::U64(*value)],
        Token::I32(value) => vec![Arg::I32(*value)],
        Token::Null => vec![Arg::Null],
        other => vec![Arg::Token(other.clone())],
    }
}

fn case(call: &Call, args: Vec<Arg>, phase: Phase) -> Case {
    let mut id = String::new();
    if phase == Phase::BeforeInit {
        id.push_str("before-init ");
    }
    let _ = write!(id, "{}(", call.function);
    for (position, arg) in args.iter().enumerate() {
        if position > 0 {
            id.push_str(", ");
        }
        let _ = match arg {
            Arg::Device(index) => write!(id, "dev{index}"),
            Arg::ForeignDevice => write!(id, "foreign"),
            Arg::Index(index) => write!(id, "{index}"),
            Arg::Uuid(index) => write!(id, "uuid{index}"),
            Arg::BusId(index) => write!(id, "busid{index}"),
            Arg::Unknown => write!(id, "\"unknown\""),
            Arg::U32(value) => write!(id, "{value}"),
            Arg::U64(value) => write!(id, "{value}"),
            Arg::I32(value) => write!(id, "{value}"),
            Arg::Null => write!(id, "NULL"),
            Arg::NulledOut(Token::Str(size)) => write!(id, "NULL/{size}"),
            Arg::NulledOut(_) => write!(id, "NULL"),
            Arg::Short(size) => write!(id, "str:{size}/1"),
            Arg::Token(token) => write!(id, "{token}"),
        };
    }
    id.push(')');
    Case {
        id,
        function: call.function.clone(),
        returns: call.returns,
        args,
        phase,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::script::parse;

    fn script(text: &str) -> Script {
        parse(&format!("[calls]\n{text}")).expect("parses")
    }

    #[test]
    fn every_device_and_value_is_a_case_then_the_misuse_cases() {
        let cases = initialised(&script("nvmlDeviceGetClockInfo dev u32:0,1 out:u32"), 2);
        let ids: Vec<&str> = cases.iter().map(|case| case.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "nvmlDeviceGetClockInfo(dev0, 0, out:u32)",
                "nvmlDeviceGetClockInfo(dev0, 1, out:u32)",
                "nvmlDeviceGetClockInfo(dev1, 0, out:u32)",
                "nvmlDeviceGetClockInfo(dev1, 1, out:u32)",
                "nvmlDeviceGetClockInfo(dev0, 0, NULL)",
                "nvmlDeviceGetClockInfo(foreign, 0, out:u32)",
            ]
        );
    }

    #[test]
    fn strings_get_a_null_and_a_short_case_and_indices_run_one_past_the_end() {
        let cases = initialised(&script("nvmlDeviceGetName dev str:96"), 1);
        let ids: Vec<&str> = cases.iter().map(|case| case.id.as_str()).collect();
        assert_eq!(
            ids,
            [
                "nvmlDeviceGetName(dev0, str:96)",
                "nvmlDeviceGetName(dev0, NULL/96)",
                "nvmlDeviceGetName(dev0, str:96/1)",
                "nvmlDeviceGetName(foreign, str:96)",
            ]
        );
        let cases = initialised(&script("nvmlDeviceGetHandleByIndex_v2 idx dev-out"), 2);
        assert_eq!(cases[2].id, "nvmlDeviceGetHandleByIndex_v2(2, dev-out)");
    }

    #[test]
    fn before_init_each_call_runs_once_with_foreign_handles_then_the_lifecycle() {
        let script = parse(
            "[lifecycle]\nnvmlInit_v2\n[calls]\nnvmlDeviceGetName dev str:96\nnvmlDeviceGetHandleByUUID uuid dev-out",
        )
        .expect("parses");
        let ids: Vec<String> = uninitialised(&script)
            .into_iter()
            .map(|case| case.id)
            .collect();
        assert_eq!(
            ids,
            [
                "before-init nvmlDeviceGetName(foreign, str:96)",
                "before-init nvmlDeviceGetHandleByUUID(\"unknown\", dev-out)",
                "nvmlInit_v2()",
            ]
        );
    }

    #[test]
    fn the_shipped_script_has_unique_case_ids() {
        let script = parse(crate::script::SHIPPED).expect("parses");
        let mut cases = uninitialised(&script);
        cases.extend(initialised(&script, 8));
        let mut ids = std::collections::HashSet::new();
        for case in &cases {
            assert!(ids.insert(case.id.clone()), "duplicate case id {}", case.id);
        }
    }
}
