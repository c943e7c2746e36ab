//! Measuring both sides through the driver: one side's environment, the
//! interleaved rounds, and the identity answers compared.

use std::{collections::BTreeMap, path::Path};

use anyhow::{bail, Context as _, Result};
use xshell::{cmd, Shell};

use super::sides::Side;
use super::table::parse_pairs;

/// Runs the driver with a side's environment; returns its stdout lines.
pub(super) fn driver(
    sh: &Shell,
    driver: &Path,
    side: &Side,
    node: &str,
    args: &[String],
) -> Result<Vec<String>> {
    let out = cmd!(sh, "{driver} {args...}")
        .env(node_layout::env::MOCK_NVML_CONFIG, &side.profile)
        .env(node_layout::env::MOCK_TOPOLOGY_CONFIG, &side.topology)
        .env(node_layout::env::NODE_NAME, node)
        .env("LD_LIBRARY_PATH", &side.lib_dir)
        .read()
        .with_context(|| format!("driver {} against {}", args.join(" "), side.name))?;
    Ok(out.lines().map(str::to_owned).collect())
}

/// Runs `each` for every side, in turn, `rounds` times: both sides measured
/// in the same minutes, so load changes hit both.
pub(super) fn interleaved<F>(rounds: usize, sides: &[Side], mut each: F) -> Result<()>
where
    F: FnMut(usize, &Side) -> Result<()>,
{
    for _ in 0..rounds {
        for (index, side) in sides.iter().enumerate() {
            each(index, side)?;
        }
    }
    Ok(())
}

/// The figure `key` of a driver `line`, parsed into `pairs`.
pub(super) fn figure(pairs: &BTreeMap<String, f64>, key: &str, line: &str) -> Result<f64> {
    pairs
        .get(key)
        .copied()
        .with_context(|| format!("no {key} in {line:?}"))
}

/// The `key=value` figures of the driver's first line for `args`.
pub(super) fn driver_pairs(
    sh: &Shell,
    program: &Path,
    side: &Side,
    node: &str,
    args: &[String],
) -> Result<BTreeMap<String, f64>> {
    let lines = driver(sh, program, side, node, args)?;
    parse_pairs(lines.first().map_or("", String::as_str))
}

/// What a library answers for one node: per GPU (cluster, clique, state, memory) and UUIDs.
pub(super) fn identity(
    sh: &Shell,
    program: &Path,
    side: &Side,
    node: &str,
) -> Result<(Vec<String>, usize)> {
    let lines = driver(
        sh,
        program,
        side,
        node,
        &["identity".into(), side.library.display().to_string()],
    )?;
    let mut facts = Vec::new();
    let mut uuids = std::collections::BTreeSet::new();
    for line in &lines {
        let mut kept = Vec::new();
        for pair in line.split_whitespace() {
            match pair.split_once('=') {
                Some(("uuid", uuid)) => {
                    uuids.insert(uuid.to_owned());
                }
                Some(_) => kept.push(pair),
                None => bail!("driver identity printed {line:?}"),
            }
        }
        facts.push(kept.join(" "));
    }
    Ok((facts, uuids.len()))
}

/// What differs between two `identity` answers, one entry per field and GPU set.
pub(super) fn differences(
    theirs: &[String],
    mine: &[String],
    their_uuids: usize,
    my_uuids: usize,
) -> Vec<String> {
    let mut out = Vec::new();
    if their_uuids != my_uuids {
        out.push(format!(
            "distinct UUIDs: upstream {their_uuids}, ours {my_uuids}"
        ));
    }
    if theirs.len() != mine.len() {
        out.push(format!(
            "GPUs: upstream {}, ours {}",
            theirs.len(),
            mine.len()
        ));
    }
    let mut by_field: BTreeMap<(String, String, String), Vec<String>> = BTreeMap::new();
    for (their_line, my_line) in theirs.iter().zip(mine) {
        let gpu = my_line
            .split_whitespace()
            .next()
            .unwrap_or("gpu=?")
            .to_owned();
        for (their_pair, my_pair) in their_line
            .split_whitespace()
            .zip(my_line.split_whitespace())
        {
            if their_pair != my_pair {
                let key = their_pair
                    .split_once('=')
                    .map_or(their_pair, |(key, _)| key);
                let value = |pair: &str| pair.split_once('=').map_or(pair, |(_, v)| v).to_owned();
                by_field
                    .entry((key.to_owned(), value(their_pair), value(my_pair)))
                    .or_default()
                    .push(gpu.clone());
            }
        }
    }
    for ((key, theirs, mine), gpus) in by_field {
        out.push(format!(
            "{key}: upstream {theirs}, ours {mine} ({})",
            gpus.join(", ")
        ));
    }
    out
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    #[test]
    fn differences_name_the_field_and_the_gpus() {
        let theirs = [
            "gpu=0 clique=1 memory_total=2".to_owned(),
            "gpu=1 clique=1 memory_total=2".to_owned(),
        ];
        let mine = [
            "gpu=0 clique=1 memory_total=3".to_owned(),
            "gpu=1 clique=1 memory_total=3".to_owned(),
        ];
        assert_eq!(
            differences(&theirs, &mine, 2, 2),
            ["memory_total: upstream 2, ours 3 (gpu=0, gpu=1)"]
        );
        assert!(differences(&theirs, &theirs, 2, 2).is_empty());
        assert_eq!(
            differences(&theirs, &theirs, 2, 1),
            ["distinct UUIDs: upstream 2, ours 1"]
        );
    }
}
