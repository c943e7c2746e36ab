//! External commands (docker, kind, helm) behind a small trait, so the
//! orchestration can be driven by a scripted fake in tests.

#[cfg(test)]
use std::cell::RefCell;
#[cfg(test)]
use std::collections::VecDeque;
use std::path::PathBuf;

use xshell::{cmd, Shell};

/// A command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cmd {
    /// The program (a name on PATH or a path).
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
    /// Stream output to the terminal instead of capturing it.
    pub stream: bool,
}

impl Cmd {
    /// A captured command.
    pub fn new(program: &str, args: &[&str]) -> Cmd {
        Cmd {
            program: program.to_owned(),
            args: args.iter().map(|it| (*it).to_owned()).collect(),
            stream: false,
        }
    }

    /// The same command, streamed.
    pub fn streamed(mut self) -> Cmd {
        self.stream = true;
        self
    }

    /// `program arg…` for messages.
    pub fn display(&self) -> String {
        let mut line = self.program.clone();
        for arg in &self.args {
            line.push(' ');
            line.push_str(arg);
        }
        line
    }
}

/// What a finished command left.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Output {
    /// Exit status zero.
    pub ok: bool,
    /// Captured stdout (empty when streamed).
    pub stdout: String,
    /// Captured stderr (empty when streamed).
    pub stderr: String,
}

/// Runs commands.
pub trait Runner {
    /// Runs `cmd` to completion; `Err` only when it could not be started.
    fn run(&self, cmd: &Cmd) -> anyhow::Result<Output>;

    /// Runs `cmd` and fails with its stderr unless it exits zero.
    fn check(&self, cmd: &Cmd) -> anyhow::Result<Output> {
        let out = self.run(cmd)?;
        if !out.ok {
            anyhow::bail!("`{}` failed: {}", cmd.display(), out.stderr.trim());
        }
        Ok(out)
    }
}

/// The real runner: xshell, with tool names mapped to resolved paths.
pub struct ShellRunner<'a> {
    sh: &'a Shell,
    kind: PathBuf,
    helm: PathBuf,
}

impl<'a> ShellRunner<'a> {
    /// A runner using these kind and helm binaries.
    pub fn new(sh: &'a Shell, kind: PathBuf, helm: PathBuf) -> ShellRunner<'a> {
        ShellRunner { sh, kind, helm }
    }
}

impl Runner for ShellRunner<'_> {
    fn run(&self, cmd: &Cmd) -> anyhow::Result<Output> {
        let program: PathBuf = match cmd.program.as_str() {
            "kind" => self.kind.clone(),
            "helm" => self.helm.clone(),
            other => PathBuf::from(other),
        };
        let args = &cmd.args;
        tracing::debug!(command = %cmd.display(), "run");
        let expr = cmd!(self.sh, "{program} {args...}").quiet().ignore_status();
        let run = || {
            if cmd.stream {
                return expr.run().map(|()| Output {
                    ok: true,
                    ..Output::default()
                });
            }
            expr.output().map(|out| Output {
                ok: out.status.success(),
                stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
                stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
            })
        };
        match run() {
            Ok(out) => Ok(out),
            Err(err) => anyhow::bail!("cannot run `{}`: {err}", cmd.display()),
        }
    }
}

#[cfg(test)]
/// A scripted runner for tests: each call must match the next expectation
/// (by a prefix of its command line) and gets its canned output.
#[derive(Debug, Default)]
#[cfg(test)]
pub struct FakeRunner {
    script: RefCell<VecDeque<(String, Output)>>,
    seen: RefCell<Vec<String>>,
}

#[cfg(test)]
impl FakeRunner {
    /// Expects a command line starting with `prefix`, answering `out`.
    pub fn expect(&self, prefix: &str, ok: bool, stdout: &str) -> &FakeRunner {
        self.script.borrow_mut().push_back((
            prefix.to_owned(),
            Output {
                ok,
                stdout: stdout.to_owned(),
                stderr: if ok {
                    String::new()
                } else {
                    format!("{prefix}: failed")
                },
            },
        ));
        self
    }

    /// Every command line run so far.
    pub fn seen(&self) -> Vec<String> {
        self.seen.borrow().clone()
    }

    /// Expectations not yet consumed.
    pub fn remaining(&self) -> usize {
        self.script.borrow().len()
    }
}

#[cfg(test)]
impl Runner for FakeRunner {
    fn run(&self, cmd: &Cmd) -> anyhow::Result<Output> {
        let line = cmd.display();
        self.seen.borrow_mut().push(line.clone());
        let Some((prefix, out)) = self.script.borrow_mut().pop_front() else {
            anyhow::bail!("unexpected command `{line}`: the script is exhausted");
        };
        if !line.starts_with(&prefix) {
            anyhow::bail!("unexpected command `{line}`: expected one starting with `{prefix}`");
        }
        Ok(out)
    }
}
