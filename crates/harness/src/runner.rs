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
    /// Stream output to the terminal as it comes (stderr is still captured,
    /// for the error message).
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

    /// A captured command from owned arguments.
    pub fn with_args(program: &str, args: Vec<String>) -> Cmd {
        Cmd {
            program: program.to_owned(),
            args,
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
    /// Captured stderr (also when streamed).
    pub stderr: String,
}

/// How many of a failed command's last stderr lines its error carries.
const ERROR_LINES: usize = 12;

impl Output {
    /// The line that says what went wrong: the last stderr line that starts
    /// with an error (kind follows it with `Command Output:` detail), else the last line.
    pub fn headline(&self) -> String {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim)
            .filter(|it| !it.is_empty())
            .collect();
        lines
            .iter()
            .rev()
            .find(|it| {
                it.starts_with("ERROR") || it.starts_with("Error") || it.starts_with("error")
            })
            .or(lines.last())
            .map_or_else(
                || "(it printed nothing on stderr)".to_owned(),
                |it| (*it).to_owned(),
            )
    }

    /// The command's own message: the last lines of its stderr.
    pub fn error_text(&self) -> String {
        let lines: Vec<&str> = self
            .stderr
            .lines()
            .map(str::trim_end)
            .filter(|it| !it.trim().is_empty())
            .collect();
        let tail = &lines[lines.len().saturating_sub(ERROR_LINES)..];
        if tail.is_empty() {
            "(it printed nothing on stderr)".to_owned()
        } else {
            tail.join("\n")
        }
    }
}

/// Runs commands.
pub trait Runner {
    /// Runs `cmd` to completion; `Err` only when it could not be started.
    fn run(&self, cmd: &Cmd) -> anyhow::Result<Output>;

    /// Runs `cmd` and fails with its stderr unless it exits zero.
    fn check(&self, cmd: &Cmd) -> anyhow::Result<Output> {
        let out = self.run(cmd)?;
        if !out.ok {
            return Err(failed(cmd, &out));
        }
        Ok(out)
    }
}

/// The error of `cmd` having exited non-zero with `out`: its headline and
/// its stderr's last lines.
pub fn failed(cmd: &Cmd, out: &Output) -> anyhow::Error {
    anyhow::format_err!(
        "`{}` failed: {}\n{}",
        cmd.display(),
        out.headline(),
        out.error_text()
    )
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
        if cmd.stream {
            return stream(self.sh, &program, args)
                .map_err(|err| anyhow::format_err!("cannot run `{}`: {err}", cmd.display()));
        }
        let expr = cmd!(self.sh, "{program} {args...}").quiet().ignore_status();
        let run = || {
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

/// Runs `program` with stdout on the terminal and stderr both shown as it
/// comes and captured, so a failure can carry the command's own message.
fn stream(sh: &Shell, program: &std::path::Path, args: &[String]) -> std::io::Result<Output> {
    use std::io::{BufRead, Write};
    let mut child = std::process::Command::new(program)
        .args(args)
        .current_dir(sh.current_dir())
        .stdin(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()?;
    let mut captured = String::new();
    if let Some(stderr) = child.stderr.take() {
        let mut terminal = std::io::stderr();
        for line in std::io::BufReader::new(stderr).lines() {
            let line = line?;
            let _ = writeln!(terminal, "{line}");
            captured.push_str(&line);
            captured.push('\n');
        }
    }
    let status = child.wait()?;
    Ok(Output {
        ok: status.success(),
        stdout: String::new(),
        stderr: captured,
    })
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

    /// Expects a command line starting with `prefix` that fails with `stderr`.
    pub fn expect_failure(&self, prefix: &str, stderr: &str) -> &FakeRunner {
        self.script.borrow_mut().push_back((
            prefix.to_owned(),
            Output {
                ok: false,
                stdout: String::new(),
                stderr: stderr.to_owned(),
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

#[cfg(test)]
mod tests {
    use super::*;
    use test_support::assert_contains;

    #[test]
    fn a_failing_streamed_command_fails_with_its_own_stderr() {
        let sh = Shell::new().expect("shell");
        let runner = ShellRunner::new(&sh, PathBuf::from("kind"), PathBuf::from("helm"));
        // /bin/sh, not `sh` from PATH: Nix's build sandbox has /bin/sh but no
        // shell on the PATH its check phase declares.
        let cmd = Cmd::new(
            "/bin/sh",
            &["-c", "echo progress >&2; echo 'ERROR: failed to pull image \"no/such:image\"' >&2; exit 3"],
        )
        .streamed();
        let out = runner.run(&cmd).expect("started");
        assert!(!out.ok, "the exit status is checked");
        let err = runner.check(&cmd).expect_err("fails").to_string();
        assert_contains(&err, "failed to pull image \"no/such:image\"");
        let ok = runner
            .run(&Cmd::new("/bin/sh", &["-c", "true"]).streamed())
            .expect("started");
        assert!(ok.ok);
    }

    #[test]
    fn the_error_text_is_the_stderr_tail() {
        let out = Output {
            ok: false,
            stdout: String::new(),
            stderr: (0..30).map(|it| format!("line {it}\n")).collect(),
        };
        let text = out.error_text();
        assert!(text.starts_with("line 18"), "{text}");
        assert!(text.ends_with("line 29"), "{text}");
        assert_eq!(
            Output::default().error_text(),
            "(it printed nothing on stderr)"
        );
        let kind = Output {
            ok: false,
            stdout: String::new(),
            stderr: "Creating cluster\nERROR: failed to pull image \"x\"\nCommand Output: no such host\n".to_owned(),
        };
        assert_eq!(kind.headline(), "ERROR: failed to pull image \"x\"");
    }
}
