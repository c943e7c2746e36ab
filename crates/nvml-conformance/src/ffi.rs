//! The runner's side that touches the library: `dlopen` by path, the device table, and each case
//! called through a generic C signature.
//!
//! Every NVML function takes at most six integer or pointer arguments and returns an
//! `nvmlReturn_t` (or, for `nvmlErrorString`, a pointer), so each is called as
//! `fn(usize, usize, usize, usize, usize, usize)`: on the System V x86-64 and AArch64 ABIs the
//! first six integer arguments travel in registers, and a callee ignores the ones it does not
//! declare. The script never passes a floating-point argument.

#![allow(unsafe_code)]

use std::ffi::{c_char, CStr, CString};
use std::path::Path;

use libloading::Library;

use crate::expand::{Arg, Case, Phase};
use crate::render::{self, Output};
use crate::script::{Returns, Token};

type Generic = unsafe extern "C" fn(usize, usize, usize, usize, usize, usize) -> u32;
type GenericStr = unsafe extern "C" fn(usize, usize, usize, usize, usize, usize) -> *const c_char;

/// Readable memory that is no handle any library issued: the foreign device.
static FOREIGN: [u64; 512] = [0; 512];

/// A library opened for the run, and its devices once initialised.
pub struct Runner {
    library: Library,
    handles: Vec<usize>,
    uuids: Vec<CString>,
    bus_ids: Vec<CString>,
}

/// Why the run cannot go on.
#[derive(Debug, thiserror::Error)]
pub enum RunError {
    /// `dlopen` failed.
    #[error("cannot load {path}: {reason}")]
    Open {
        /// The library.
        path: String,
        /// The loader's message.
        reason: String,
    },
    /// Initialising or listing the devices failed.
    #[error("{call} returned {code}")]
    Setup {
        /// What was called.
        call: &'static str,
        /// Its return code.
        code: u32,
    },
}

impl Runner {
    /// Opens the library at `path`.
    pub fn open(path: &Path) -> Result<Runner, RunError> {
        // SAFETY: loading an NVML library runs its initialisers, which NVML libraries (ours and
        // upstream's Go runtime) keep free of side effects on the caller.
        let library = unsafe { Library::new(path) }.map_err(|err| RunError::Open {
            path: path.display().to_string(),
            reason: err.to_string(),
        })?;
        Ok(Runner {
            library,
            handles: Vec::new(),
            uuids: Vec::new(),
            bus_ids: Vec::new(),
        })
    }

    /// `nvmlInit_v2`, then every device's handle, UUID and bus id; returns the device count.
    pub fn initialise(&mut self) -> Result<usize, RunError> {
        let setup = |call: &'static str, code: u32| match code {
            0 => Ok(()),
            code => Err(RunError::Setup { call, code }),
        };
        setup(
            "nvmlInit_v2",
            self.call("nvmlInit_v2", &[]).unwrap_or(u32::MAX),
        )?;
        let mut count = 0u32;
        let code = self.call("nvmlDeviceGetCount_v2", &[&mut count as *mut u32 as usize]);
        setup("nvmlDeviceGetCount_v2", code.unwrap_or(u32::MAX))?;
        for index in 0..count {
            let mut handle = 0usize;
            let code = self.call(
                "nvmlDeviceGetHandleByIndex_v2",
                &[index as usize, &mut handle as *mut usize as usize],
            );
            setup("nvmlDeviceGetHandleByIndex_v2", code.unwrap_or(u32::MAX))?;
            let mut uuid = [0u8; 96];
            let code = self.call(
                "nvmlDeviceGetUUID",
                &[handle, uuid.as_mut_ptr() as usize, 96],
            );
            setup("nvmlDeviceGetUUID", code.unwrap_or(u32::MAX))?;
            let mut pci = [0u8; 68];
            let code = self.call(
                "nvmlDeviceGetPciInfo_v3",
                &[handle, pci.as_mut_ptr() as usize],
            );
            setup("nvmlDeviceGetPciInfo_v3", code.unwrap_or(u32::MAX))?;
            self.handles.push(handle);
            self.uuids.push(c_string(&uuid));
            self.bus_ids.push(c_string(&pci[36..68]));
        }
        Ok(self.handles.len())
    }

    /// Makes one case and renders what it gave.
    pub fn run(&self, case: &Case) -> (String, Vec<String>) {
        let mut slots: Vec<Slot> = case.args.iter().map(|arg| self.slot(arg)).collect();
        let mut words = Vec::with_capacity(6);
        for slot in &mut slots {
            slot.push_words(&mut words);
        }
        let result = match case.returns {
            Returns::Code => match self.call(&case.function, &words) {
                Some(code) => code.to_string(),
                None => "missing".into(),
            },
            Returns::Str => self.call_str(&case.function, &words),
        };
        let mut outputs: Vec<String> = slots
            .iter()
            .filter_map(|slot| slot.render(&self.handles))
            .collect();
        for slot in &slots {
            slot.release(self);
        }
        if case.phase == Phase::Lifecycle {
            let code = self.call("nvmlShutdown", &[]).unwrap_or(u32::MAX);
            outputs.push(format!("then nvmlShutdown={code}"));
        }
        (result, outputs)
    }

    fn slot(&self, arg: &Arg) -> Slot {
        match arg {
            Arg::Device(index) => Slot::Word(self.handles.get(*index).copied().unwrap_or(0)),
            Arg::ForeignDevice => Slot::Word(FOREIGN.as_ptr() as usize),
            Arg::Index(value) | Arg::U32(value) => Slot::Word(*value as usize),
            Arg::U64(value) => Slot::Word(*value as usize),
            Arg::I32(value) => Slot::Word(*value as u32 as usize),
            Arg::Null => Slot::Word(0),
            Arg::Uuid(index) => Slot::text(self.uuids.get(*index)),
            Arg::BusId(index) => Slot::text(self.bus_ids.get(*index)),
            Arg::Unknown => Slot::Text(CString::from(c"GPU-00000000-0000-0000-0000-000000000000")),
            Arg::NulledOut(Token::Str(size)) => Slot::Words(vec![0, *size]),
            Arg::NulledOut(Token::Fields(ids)) => Slot::Words(vec![ids.len(), 0]),
            Arg::NulledOut(_) => Slot::Word(0),
            Arg::Short(size) => Slot::Output(Output::string(*size, Some(1))),
            Arg::Token(Token::Set) => Slot::EventSet(self.event_set(), true),
            Arg::Token(Token::SetConsumed) => Slot::EventSet(self.event_set(), false),
            Arg::Token(token) => Slot::Output(Output::for_token(token)),
        }
    }

    fn event_set(&self) -> usize {
        let mut set = 0usize;
        let _ = self.call("nvmlEventSetCreate", &[&mut set as *mut usize as usize]);
        set
    }

    /// Calls `name` with `words`; `None` if the library does not export it.
    fn call(&self, name: &str, words: &[usize]) -> Option<u32> {
        // SAFETY: every NVML function returning `nvmlReturn_t` takes at most six integer or
        // pointer arguments (see the module doc for why the generic signature is sound), and the
        // script gives each pointer argument a live buffer of the size nvml.h's type needs.
        let function = unsafe { self.library.get::<Generic>(name.as_bytes()) }.ok()?;
        let word = |i: usize| words.get(i).copied().unwrap_or(0);
        // SAFETY: as above; the buffers outlive the call.
        Some(unsafe { function(word(0), word(1), word(2), word(3), word(4), word(5)) })
    }

    fn call_str(&self, name: &str, words: &[usize]) -> String {
        // SAFETY: as in `call`, for a function returning `const char *`.
        let Ok(function) = (unsafe { self.library.get::<GenericStr>(name.as_bytes()) }) else {
            return "missing".into();
        };
        let word = |i: usize| words.get(i).copied().unwrap_or(0);
        // SAFETY: as in `call`.
        let text = unsafe { function(word(0), word(1), word(2), word(3), word(4), word(5)) };
        if text.is_null() {
            return "NULL".into();
        }
        // SAFETY: NVML returns a NUL-terminated static string.
        unsafe { CStr::from_ptr(text) }
            .to_string_lossy()
            .into_owned()
    }
}

fn c_string(bytes: &[u8]) -> CString {
    let end = bytes
        .iter()
        .position(|byte| *byte == 0)
        .unwrap_or(bytes.len());
    CString::new(&bytes[..end]).unwrap_or_default()
}

/// One argument's storage during a call.
enum Slot {
    Word(usize),
    Words(Vec<usize>),
    Text(CString),
    Output(Output),
    /// An event set, and whether the runner frees it after the call.
    EventSet(usize, bool),
}

impl Slot {
    fn text(value: Option<&CString>) -> Slot {
        Slot::Text(value.cloned().unwrap_or_default())
    }

    fn push_words(&mut self, words: &mut Vec<usize>) {
        match self {
            Slot::Word(word) | Slot::EventSet(word, _) => words.push(*word),
            Slot::Words(list) => words.extend(list.iter().copied()),
            Slot::Text(text) => words.push(text.as_ptr() as usize),
            Slot::Output(output) => output.push_words(words),
        }
    }

    fn render(&self, handles: &[usize]) -> Option<String> {
        match self {
            Slot::Output(output) => Some(render::output(output, handles)),
            _ => None,
        }
    }

    fn release(&self, runner: &Runner) {
        if let Slot::EventSet(set, true) = self {
            if *set != 0 {
                let _ = runner.call("nvmlEventSetFree", &[*set]);
            }
        }
    }
}
