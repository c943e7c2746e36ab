//! The table's rows, measured: process start, in-process calls, whole
//! processes and the library size, every measure interleaved over both sides.

use std::{collections::BTreeMap, fs, path::Path};

use anyhow::Result;
use xshell::{cmd, Shell};

use super::measure::{driver, driver_pairs, figure, interleaved};
use super::sides::{Probes, Side};
use super::table::{parse_pairs, Row, Samples};
use crate::flags::BenchVsUpstreamArgs;

/// What every measure runs with.
pub(super) struct Bench<'a> {
    pub(super) sh: &'a Shell,
    /// The built `xtask/bench/driver.c`.
    pub(super) program: &'a Path,
    /// Upstream, then ours.
    pub(super) sides: &'a [Side; 2],
    /// The node whose identity both libraries serve.
    pub(super) node: &'a str,
    pub(super) args: &'a BenchVsUpstreamArgs,
}

impl Bench<'_> {
    /// Process start → first fabric answer, dlopen, first init, peak RSS;
    /// and the floor of the start rows: the same spawn of the driver, timed
    /// to its main().
    pub(super) fn starts(&self) -> Result<Starts> {
        let args = self.args;
        let mut start: [BTreeMap<&str, Samples>; 2] = Default::default();
        let per_block = args.starts.div_ceil(args.rounds).max(1);
        let run =
            |side: &Side, argv: &[String]| driver(self.sh, self.program, side, self.node, argv);
        interleaved(args.rounds, self.sides, |index, side| {
            let library = side.library.display().to_string();
            let lines = run(side, &["starts".into(), per_block.to_string(), library])?;
            for line in lines {
                let pairs = parse_pairs(&line)?;
                for key in [
                    "start_to_fabric_us",
                    "dlopen_us",
                    "init_us",
                    "hwm_kb",
                    "base_hwm_kb",
                ] {
                    start[index]
                        .entry(key)
                        .or_default()
                        .0
                        .push(figure(&pairs, key, &line)?);
                }
                let increment = pairs["hwm_kb"] - pairs["base_hwm_kb"];
                start[index]
                    .entry("increment_kb")
                    .or_default()
                    .0
                    .push(increment);
            }
            Ok(())
        })?;
        let bare = self.bares(per_block)?;
        let pick = |key: &str| -> [Samples; 2] {
            [
                start[0].get(key).cloned().unwrap_or_default(),
                start[1].get(key).cloned().unwrap_or_default(),
            ]
        };
        let mut rows = Vec::new();
        for (measure, key, unit, target) in [
            (
                format!(
                    "process start → first fabric query ({} processes)",
                    per_block * args.rounds
                ),
                "start_to_fabric_us",
                "µs",
                0.1,
            ),
            ("dlopen of the library".to_owned(), "dlopen_us", "µs", 0.1),
            (
                "nvmlInit_v2 alone, first call".to_owned(),
                "init_us",
                "µs",
                0.1,
            ),
        ] {
            rows.push(Row::lower(measure, unit, pick(key), target));
        }
        let rss = [
            Row::lower(
                "peak RSS after init and one round of queries",
                "kB",
                pick("hwm_kb"),
                f64::INFINITY,
            ),
            Row::lower(
                "peak RSS increment of dlopen + init + one round (the library's share)",
                "kB",
                pick("increment_kb"),
                0.2,
            ),
        ];
        Ok(Starts { rows, rss, bare })
    }

    /// The floor of the start rows: `per_block` spawns of the driver per
    /// side and round, timed to its main().
    fn bares(&self, per_block: usize) -> Result<[Samples; 2]> {
        let mut bare: [Samples; 2] = Default::default();
        interleaved(self.args.rounds, self.sides, |index, side| {
            let argv = ["bares".into(), per_block.to_string()];
            for line in driver(self.sh, self.program, side, self.node, &argv)? {
                let pairs = parse_pairs(&line)?;
                bare[index].0.push(figure(&pairs, "start_us", &line)?);
            }
            Ok(())
        })?;
        Ok(bare)
    }

    /// In-process measures, one process per side per round: the init →
    /// queries → shutdown cycle, a round with init held, 8 threads.
    pub(super) fn in_process_rows(&self) -> Result<Vec<Row>> {
        let args = self.args;
        let mut cycle_mean: [Samples; 2] = Default::default();
        let mut cycle_min: [Samples; 2] = Default::default();
        let mut query: [Samples; 2] = Default::default();
        let mut threads: [Samples; 2] = Default::default();
        interleaved(args.rounds, self.sides, |index, side| {
            let library = side.library.display().to_string();
            let run = |argv: &[String]| driver_pairs(self.sh, self.program, side, self.node, argv);
            let pairs = run(&["cycle".into(), library.clone(), args.cycles.to_string()])?;
            cycle_mean[index].0.push(pairs["cycle_mean_us"]);
            cycle_min[index].0.push(pairs["cycle_min_us"]);
            let pairs = run(&["queries".into(), library.clone(), args.cycles.to_string()])?;
            query[index].0.push(pairs["round_median_us"]);
            let pairs = run(&[
                "threads".into(),
                library,
                "8".into(),
                args.thread_rounds.to_string(),
            ])?;
            threads[index].0.push(pairs["rounds_per_s"]);
            Ok(())
        })?;
        Ok(vec![
            Row::lower(
                format!(
                    "init → 4 × (handle, fabric v1, fabric v3, uuid, memory) → shutdown, mean of {}",
                    args.cycles
                ),
                "µs",
                cycle_mean,
                0.1,
            ),
            Row::lower("the same cycle, fastest iteration", "µs", cycle_min, 0.1),
            Row::lower(
                "one round of queries with init held, median",
                "µs",
                query,
                0.1,
            ),
            Row::higher(
                format!("8 threads × {} query rounds", args.thread_rounds),
                "rounds/s",
                threads,
                0.1,
            ),
        ])
    }

    /// Whole processes: check-fabric, pynvml, go-nvml, and the floors (the
    /// same programs on both sides, so their ratio only shows the noise).
    pub(super) fn process_rows(&self, probes: &Probes, bare: [Samples; 2]) -> Result<Vec<Row>> {
        let args = self.args;
        let mut wall: [[Samples; 2]; 5] = Default::default();
        let mut rss: [[Samples; 2]; 5] = Default::default();
        interleaved(args.rounds, self.sides, |index, side| {
            let commands: [Vec<String>; 5] = [
                vec![side.check_fabric.display().to_string()],
                vec![
                    probes.python.display().to_string(),
                    probes.python_probe.display().to_string(),
                ],
                vec![probes.go_probe.display().to_string()],
                vec![probes.floor_c.display().to_string()],
                vec![probes.floor_go.display().to_string()],
            ];
            for (which, command) in commands.iter().enumerate() {
                let mut argv = vec!["time".to_owned(), args.processes.to_string()];
                argv.extend(command.iter().cloned());
                let pairs = driver_pairs(self.sh, self.program, side, self.node, &argv)?;
                wall[which][index].0.push(pairs["wall_median_us"]);
                rss[which][index].0.push(pairs["maxrss_median_kb"]);
            }
            Ok(())
        })?;
        let [check, pynvml, go, floor_static, floor_empty_go] = wall;
        let [check_rss, _, _, floor_static_rss, _] = rss;
        Ok([
            ("check-fabric whole process", "µs", check, 0.1),
            ("check-fabric peak RSS", "kB", check_rss, 0.2),
            (
                "pynvml process (init, 4 × handle/fabric/uuid/memory, shutdown)",
                "µs",
                pynvml,
                f64::INFINITY,
            ),
            ("go-nvml process (the same calls)", "µs", go, 0.1),
            (
                "floor of the start rows: spawn → main() of the driver, no library",
                "µs",
                bare,
                f64::INFINITY,
            ),
            (
                "floor of the process rows: a static C program that does nothing",
                "µs",
                floor_static,
                f64::INFINITY,
            ),
            ("its peak RSS", "kB", floor_static_rss, f64::INFINITY),
            (
                "floor of the go-nvml row: an empty Go program",
                "µs",
                floor_empty_go,
                f64::INFINITY,
            ),
        ]
        .into_iter()
        .map(|(measure, unit, samples, target)| Row::lower(measure, unit, samples, target))
        .collect())
    }

    /// Library size, stripped (`strip` on a copy in `work`).
    pub(super) fn size_row(&self, work: &Path) -> Result<Row> {
        let mut sizes = Vec::new();
        for side in self.sides {
            let copy = work.join(format!("{}-stripped.so", side.name));
            fs::copy(&side.library, &copy)?;
            let sh = self.sh;
            cmd!(sh, "strip {copy}").run()?;
            sizes.push(fs::metadata(&copy)?.len() as f64 / 1000.0);
        }
        Ok(Row::lower(
            "library size, stripped (`strip`)",
            "kB",
            [Samples(vec![sizes[0]]), Samples(vec![sizes[1]])],
            0.1,
        ))
    }
}

/// What the start measures give: their rows, the two peak RSS rows (listed
/// after the in-process rows) and the floor samples (listed with the
/// process rows).
pub(super) struct Starts {
    pub(super) rows: Vec<Row>,
    pub(super) rss: [Row; 2],
    pub(super) bare: [Samples; 2],
}
