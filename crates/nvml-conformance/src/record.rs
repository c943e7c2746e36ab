//! What the runner prints, one JSON object per line, and how a run is read back: the one contract
//! between `nvml-conformance run` and `cargo xtask conformance`.

use serde::{Deserialize, Serialize};

/// One line of a run's output.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "event", rename_all = "snake_case")]
pub enum Line {
    /// Case `n` is about to be called (a run that stops here crashed in it).
    Start {
        /// Position in the run.
        n: usize,
        /// The case's id.
        id: String,
    },
    /// Case `n` returned.
    Outcome {
        /// Position in the run.
        n: usize,
        /// The return code in decimal, or the returned string.
        result: String,
        /// Each output, rendered.
        outputs: Vec<String>,
    },
    /// The run made every case.
    Done {
        /// How many.
        cases: usize,
    },
}

/// What one case gave.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Outcome {
    /// The case's id.
    pub id: String,
    /// The result and outputs, or how the process ended.
    pub result: Result<(String, Vec<String>), String>,
}

/// A run read back: the outcomes, and where it stopped if it did not finish.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Partial {
    /// Outcomes in order.
    pub outcomes: Vec<Outcome>,
    /// The case that was running when the output ended (crashed), by position and id.
    pub crashed_in: Option<(usize, String)>,
    /// Whether the run said it made every case.
    pub done: bool,
}

/// Reads one run's output (the runner started at some `--skip`). Lines that are not the
/// runner's (a library writing to stdout) are skipped: a case whose outcome line is missing
/// counts as the one the run stopped in.
pub fn read(output: &str) -> Partial {
    let mut partial = Partial::default();
    let mut pending: Option<(usize, String)> = None;
    for line in output.lines() {
        let Ok(line) = serde_json::from_str::<Line>(line) else {
            continue;
        };
        match line {
            Line::Start { n, id } => pending = Some((n, id)),
            Line::Outcome { n, result, outputs } => {
                if let Some((started, id)) = pending.take() {
                    if started == n {
                        partial.outcomes.push(Outcome {
                            id,
                            result: Ok((result, outputs)),
                        });
                    }
                }
            }
            Line::Done { .. } => partial.done = true,
        }
    }
    partial.crashed_in = pending;
    partial
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_that_stops_inside_a_case_names_it() {
        let text = [
            r#"{"event":"start","n":0,"id":"a()"}"#,
            r#"{"event":"outcome","n":0,"result":"0","outputs":["7"]}"#,
            "noise from the library",
            r#"{"event":"start","n":1,"id":"b()"}"#,
        ]
        .join("\n");
        let partial = read(&text);
        assert_eq!(partial.outcomes.len(), 1);
        assert_eq!(
            partial.outcomes[0].result,
            Ok(("0".into(), vec!["7".into()]))
        );
        assert_eq!(partial.crashed_in, Some((1, "b()".into())));
        assert!(!partial.done);
    }

    #[test]
    fn a_finished_run_is_done() {
        let text = format!(
            "{}\n{}\n{}",
            r#"{"event":"start","n":0,"id":"a()"}"#,
            r#"{"event":"outcome","n":0,"result":"3","outputs":[]}"#,
            r#"{"event":"done","cases":1}"#
        );
        let partial = read(&text);
        assert!(partial.done);
        assert_eq!(partial.crashed_in, None);
    }
}
