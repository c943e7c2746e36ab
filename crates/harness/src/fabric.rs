//! Parsing what `check-fabric` prints, strictly, and checking it against the
//! identity a worker must report.
//!
//! The text rules are upstream's (upstream-demo §1.3 `assert_clique`): one
//! `Discovered N GPU(s)` line with N > 0, `GPU <i> (<uuid>)` headers with
//! distinct indexes below N, each block with exactly one `clusterUuid`,
//! `cliqueId` and `state`, and N complete blocks. `--json` output is held to
//! the same checks.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

/// One GPU's fabric identity as check-fabric reported it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct GpuFabric {
    /// The NVML index.
    pub index: u32,
    /// The cluster uuid, as printed.
    pub cluster_uuid: String,
    /// The clique id, as printed.
    pub clique_id: String,
    /// The state value, as printed (`completed (3)`).
    pub state: String,
}

/// Why output was rejected.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ParseError(pub String);

impl fmt::Display for ParseError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

fn fail<T>(message: String) -> Result<T, ParseError> {
    Err(ParseError(message))
}

#[derive(Default)]
struct Block {
    cluster_uuid: Option<String>,
    clique_id: Option<String>,
    state: Option<String>,
}

/// Parses check-fabric's text output with upstream's strictness.
pub fn parse_text(output: &str) -> Result<Vec<GpuFabric>, ParseError> {
    let mut count: Option<u32> = None;
    let mut blocks: BTreeMap<u32, Block> = BTreeMap::new();
    let mut current: Option<u32> = None;
    for (idx, line) in output.lines().enumerate() {
        let lineno = idx + 1;
        if let Some(rest) = line.strip_prefix("Discovered ") {
            let number = count_line(lineno, line, rest)?;
            if count.is_some() {
                return fail(format!("line {lineno}: a second count line `{line}`"));
            }
            if number == 0 {
                return fail("check-fabric discovered 0 GPUs".to_owned());
            }
            count = Some(number);
            continue;
        }
        if let Some(rest) = line.strip_prefix("GPU ") {
            let Some(count) = count else {
                return fail(format!("line {lineno}: GPU header before the count line"));
            };
            let index = gpu_header(lineno, line, rest, count)?;
            if blocks.insert(index, Block::default()).is_some() {
                return fail(format!("line {lineno}: GPU index {index} repeats"));
            }
            current = Some(index);
            continue;
        }
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let field = match key.trim() {
            "clusterUuid" => 0,
            "cliqueId" => 1,
            "state" => 2,
            _ => continue,
        };
        let Some(index) = current else {
            return fail(format!(
                "line {lineno}: `{}` before any GPU header",
                key.trim()
            ));
        };
        let value = value.trim_start().to_owned();
        let block = blocks.entry(index).or_default();
        let slot = match field {
            0 => &mut block.cluster_uuid,
            1 => &mut block.clique_id,
            _ => &mut block.state,
        };
        if slot.replace(value).is_some() {
            return fail(format!(
                "line {lineno}: GPU {index} has `{}` twice",
                key.trim()
            ));
        }
    }
    let Some(count) = count else {
        return fail("no `Discovered N GPU(s)` line".to_owned());
    };
    complete_blocks(count, blocks)
}

/// `Discovered N GPU(s)`'s N (`rest` is what follows `Discovered `): digits only.
fn count_line(lineno: usize, line: &str, rest: &str) -> Result<u32, ParseError> {
    let Some(number) = rest.strip_suffix(" GPU(s)") else {
        return fail(format!("line {lineno}: malformed count line `{line}`"));
    };
    let digits = !number.is_empty() && number.bytes().all(|b| b.is_ascii_digit());
    let Some(number) = number.parse::<u32>().ok().filter(|_| digits) else {
        return fail(format!("line {lineno}: malformed count line `{line}`"));
    };
    Ok(number)
}

/// `GPU i (…)`'s index (`rest` is what follows `GPU `), below `count`.
fn gpu_header(lineno: usize, line: &str, rest: &str, count: u32) -> Result<u32, ParseError> {
    let header = rest
        .split_once(" (")
        .filter(|(_, tail)| tail.ends_with(')') && !tail.ends_with("): fabric NOT SUPPORTED"))
        .and_then(|(index, _)| {
            if index.is_empty() || !index.bytes().all(|b| b.is_ascii_digit()) {
                return None;
            }
            index.parse::<u32>().ok()
        });
    let Some(index) = header else {
        return fail(format!("line {lineno}: malformed GPU line `{line}`"));
    };
    if index >= count {
        return fail(format!(
            "line {lineno}: GPU index {index} is not below the count {count}"
        ));
    }
    Ok(index)
}

/// Every block complete, and as many as the count said.
fn complete_blocks(count: u32, blocks: BTreeMap<u32, Block>) -> Result<Vec<GpuFabric>, ParseError> {
    let mut gpus = Vec::new();
    for (index, block) in blocks {
        let (Some(cluster_uuid), Some(clique_id), Some(state)) =
            (block.cluster_uuid, block.clique_id, block.state)
        else {
            return fail(format!(
                "GPU {index}: incomplete block (needs clusterUuid, cliqueId and state)"
            ));
        };
        gpus.push(GpuFabric {
            index,
            cluster_uuid,
            clique_id,
            state,
        });
    }
    if gpus.len() != count as usize {
        return fail(format!(
            "{} complete GPU blocks for a count of {count}",
            gpus.len()
        ));
    }
    Ok(gpus)
}

/// check-fabric `--json`: `{driverVersion, nodeName, gpus[…]}`.
#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonReport {
    gpus: Vec<JsonGpu>,
}

#[derive(Debug, Deserialize)]
#[serde(rename_all = "camelCase")]
struct JsonGpu {
    index: u32,
    cluster_uuid: Option<String>,
    clique_id: Option<u64>,
    state: Option<u64>,
    state_name: Option<String>,
}

/// Parses `check-fabric --json`, with the text parser's checks.
pub fn parse_json(output: &str) -> Result<Vec<GpuFabric>, ParseError> {
    let report: JsonReport = match serde_json::from_str(output) {
        Ok(report) => report,
        Err(err) => {
            return fail(format!(
                "check-fabric --json output is not the expected document: {err}"
            ))
        }
    };
    if report.gpus.is_empty() {
        return fail("check-fabric discovered 0 GPUs".to_owned());
    }
    let count = report.gpus.len();
    let mut seen = std::collections::BTreeSet::new();
    let mut gpus = Vec::new();
    for gpu in report.gpus {
        if gpu.index as usize >= count || !seen.insert(gpu.index) {
            return fail(format!(
                "GPU index {} repeats or is not below the count {count}",
                gpu.index
            ));
        }
        let (Some(cluster_uuid), Some(clique_id), Some(state), Some(state_name)) =
            (gpu.cluster_uuid, gpu.clique_id, gpu.state, gpu.state_name)
        else {
            return fail(format!(
                "GPU {}: fabric fields missing (not supported?)",
                gpu.index
            ));
        };
        gpus.push(GpuFabric {
            index: gpu.index,
            cluster_uuid,
            clique_id: clique_id.to_string(),
            state: format!("{state_name} ({state})"),
        });
    }
    Ok(gpus)
}

/// The identity every GPU of a worker must report.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Expected {
    /// The clique id.
    pub clique: u32,
    /// The cluster uuid (compared case-insensitively).
    pub uuid: String,
}

/// Checks every GPU against the expected identity and `completed (3)`.
pub fn verify(gpus: &[GpuFabric], expected: &Expected) -> Result<(), ParseError> {
    let clique = expected.clique.to_string();
    let mut wrong = Vec::new();
    for gpu in gpus {
        if !gpu.cluster_uuid.eq_ignore_ascii_case(&expected.uuid) {
            wrong.push(format!(
                "GPU {} clusterUuid {} (want {})",
                gpu.index, gpu.cluster_uuid, expected.uuid
            ));
        }
        if gpu.clique_id != clique {
            wrong.push(format!(
                "GPU {} cliqueId {} (want {clique})",
                gpu.index, gpu.clique_id
            ));
        }
        // `^completed[[:space:]]+\(3\)$`
        let completed = gpu
            .state
            .strip_prefix("completed")
            .filter(|rest| rest.starts_with(char::is_whitespace))
            .is_some_and(|rest| rest.trim_start() == "(3)");
        if !completed {
            wrong.push(format!(
                "GPU {} state `{}` (want completed (3))",
                gpu.index, gpu.state
            ));
        }
    }
    if wrong.is_empty() {
        return Ok(());
    }
    fail(wrong.join("; "))
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use test_support::assert_contains;

    /// check-fabric's text for 4 GPUs in `clique` of domain `uuid`, all
    /// completed (the scenarios' simulations print it too).
    pub(crate) fn sample(clique: u32, uuid: &str) -> String {
        let mut out = String::from("Discovered 4 GPU(s)\n");
        for idx in 0..4 {
            out.push_str(&format!(
                "GPU {idx} (GPU-b200b200-0000-0000-0000-00000000000{idx})\n  clusterUuid : {uuid}\n  cliqueId    : {clique}\n  state       : completed (3)\n"
            ));
        }
        out
    }

    fn demo() -> Expected {
        Expected {
            clique: 1,
            uuid: "00000000-0000-0000-0000-0000000000AB".to_owned(),
        }
    }

    #[test]
    fn upstream_format_parses_and_verifies() {
        let gpus = parse_text(&sample(1, "00000000-0000-0000-0000-0000000000ab")).expect("valid");
        assert_eq!(gpus.len(), 4);
        assert_eq!(gpus[3].clique_id, "1");
        assert_eq!(gpus[3].state, "completed (3)");
        verify(&gpus, &demo()).expect("uuid compared case-insensitively");
    }

    #[test]
    fn wrong_identity_is_reported_per_gpu() {
        let gpus = parse_text(&sample(0, "00000000-0000-0000-0000-0000000000ff")).expect("valid");
        let err = verify(&gpus, &demo()).expect_err("wrong").to_string();
        assert_contains(
            &err,
            "GPU 0 clusterUuid 00000000-0000-0000-0000-0000000000ff",
        );
        assert_contains(&err, "GPU 3 cliqueId 0 (want 1)");
    }

    #[test]
    fn state_must_be_completed_3() {
        for bad in [
            "in_progress (2)",
            "completed(3)",
            "completed (3) x",
            "completed (2)",
        ] {
            let text =
                sample(1, "00000000-0000-0000-0000-0000000000ab").replacen("completed (3)", bad, 1);
            let gpus = parse_text(&text).expect("parses");
            let err = verify(&gpus, &demo()).expect_err(bad).to_string();
            assert!(err.contains("GPU 0 state"), "{bad}: {err}");
        }
        let text = sample(1, "00000000-0000-0000-0000-0000000000ab")
            .replace("completed (3)", "completed   (3)");
        verify(&parse_text(&text).expect("parses"), &demo()).expect("whitespace run allowed");
    }

    #[test]
    fn structural_errors_are_rejected() {
        let good = sample(1, "00000000-0000-0000-0000-0000000000ab");
        let cases: Vec<(String, &str)> = vec![
            (
                good.replace("Discovered 4 GPU(s)\n", ""),
                "GPU header before the count line",
            ),
            (
                good.replace("Discovered 4 GPU(s)", "Discovered 4 GPUs"),
                "malformed count line",
            ),
            (
                good.replace("Discovered 4 GPU(s)", "Discovered 0 GPU(s)"),
                "0 GPUs",
            ),
            (
                good.replace("Discovered 4 GPU(s)", "Discovered 5 GPU(s)"),
                "4 complete GPU blocks for a count of 5",
            ),
            (
                good.replace("Discovered 4 GPU(s)", "Discovered 3 GPU(s)"),
                "not below the count",
            ),
            (
                format!("Discovered 4 GPU(s)\n{good}"),
                "a second count line",
            ),
            (good.replace("GPU 2 (", "GPU 1 ("), "GPU index 1 repeats"),
            (
                good.replacen("  cliqueId    : 1\n", "", 1),
                "GPU 0: incomplete block",
            ),
            (
                good.replacen(
                    "  state       : completed (3)\n",
                    "  state       : completed (3)\n  state : completed (3)\n",
                    1,
                ),
                "has `state` twice",
            ),
            (
                good.replacen(
                    "GPU 0 (GPU-b200b200-0000-0000-0000-000000000000)",
                    "GPU 0 (x): fabric NOT SUPPORTED",
                    1,
                ),
                "malformed GPU line",
            ),
            ("".to_owned(), "no `Discovered N GPU(s)` line"),
        ];
        for (text, want) in cases {
            let err = parse_text(&text).expect_err(want).to_string();
            assert!(err.contains(want), "want `{want}`, got `{err}`");
        }
    }

    #[test]
    fn json_output_is_held_to_the_same_checks() {
        let doc = r#"{"driverVersion":"580.65.06","nodeName":"w3","gpus":[
            {"index":0,"uuid":"GPU-a","clusterUuid":"00000000-0000-0000-0000-0000000000ab","cliqueId":1,"state":3,"stateName":"completed"},
            {"index":1,"uuid":"GPU-b","clusterUuid":"00000000-0000-0000-0000-0000000000ab","cliqueId":1,"state":3,"stateName":"completed"}]}"#;
        let gpus = parse_json(doc).expect("valid");
        verify(&gpus, &demo()).expect("matches");
        let repeated = doc.replace("\"index\":1", "\"index\":0");
        assert!(parse_json(&repeated)
            .expect_err("repeat")
            .0
            .contains("repeats"));
        let unsupported = r#"{"gpus":[{"index":0,"uuid":"GPU-a"}]}"#;
        assert!(parse_json(unsupported)
            .expect_err("no fabric")
            .0
            .contains("fabric fields missing"));
        assert!(parse_json(r#"{"gpus":[]}"#)
            .expect_err("empty")
            .0
            .contains("0 GPUs"));
    }

    fn golden(name: &str) -> String {
        let path = crate::project_root()
            .join("tests/golden/check-fabric")
            .join(name);
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()))
    }

    /// check-fabric's own golden outputs (tests/golden/check-fabric), text and JSON.
    #[test]
    fn real_check_fabric_outputs_verify_per_worker() {
        let demo = |clique| Expected {
            clique,
            uuid: "00000000-0000-0000-0000-0000000000ab".to_owned(),
        };
        let rebind = Expected {
            clique: 99,
            uuid: "00000000-0000-0000-0000-0000000000ff".to_owned(),
        };
        let cases = [
            ("demo-worker", demo(0)),
            ("demo-worker2", demo(0)),
            ("demo-worker3", demo(1)),
            ("demo-worker4", demo(1)),
            ("rebind-worker", rebind.clone()),
            ("rebind-worker4", rebind.clone()),
        ];
        for (name, want) in cases {
            let text = parse_text(&golden(&format!("{name}.txt")))
                .unwrap_or_else(|err| panic!("{name}.txt: {err}"));
            let json = parse_json(&golden(&format!("{name}.json")))
                .unwrap_or_else(|err| panic!("{name}.json: {err}"));
            assert_eq!(text, json, "{name}: text and JSON agree");
            assert_eq!(text.len(), 4, "{name}: gb200 has 4 GPUs");
            verify(&text, &want).unwrap_or_else(|err| panic!("{name}: {err}"));
        }
        let wrong = parse_text(&golden("demo-worker3.txt")).expect("parses");
        assert!(
            verify(&wrong, &demo(0)).is_err(),
            "worker3 is not in clique 0"
        );
        let rebound = parse_text(&golden("rebind-worker3.txt")).expect("parses");
        assert!(
            verify(&rebound, &demo(1)).is_err(),
            "the rebind is not the demo identity"
        );
    }

    #[test]
    fn real_non_fabric_and_outside_outputs_are_rejected() {
        let err = parse_text(&golden("h100.txt")).expect_err("NOT SUPPORTED blocks");
        assert!(err.0.contains("malformed GPU line"), "{err}");
        assert!(
            parse_json(&golden("h100.json")).is_err(),
            "no fabric fields"
        );
        let outside = parse_text(&golden("outside-control-plane.txt")).expect("parses");
        let demo = Expected {
            clique: 0,
            uuid: "00000000-0000-0000-0000-0000000000ab".to_owned(),
        };
        assert!(
            verify(&outside, &demo).is_err(),
            "a node outside the topology keeps the profile defaults"
        );
    }
}
