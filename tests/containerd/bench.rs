//! Benchmark: container creation on a real containerd with 0, 1 and 2,048
//! injected IMEX channel devices (the stager stages 2,048; the pod annotation
//! selects none, `0`, or `true`).
//!
//! For each case and run, CreateContainer (NRI adjustment, spec generation) and
//! StartContainer (runc creates the device nodes) are timed through crictl,
//! then the container is removed. Cases are interleaved so drift hits them
//! equally. Prints a Markdown table of medians (and min/max).
//!
//! `sudo -E cargo bench -p integration-tests --bench containerd_channels`
//! (`BENCH_RUNS` sets the runs per case; default 9).

#[path = "harness.rs"]
mod harness;

use std::time::Duration;

use harness::{Rig, RigOptions, IMEX_ANNOTATION};

struct Case {
    label: &'static str,
    annotation: Option<&'static str>,
    devices: u32,
    create: Vec<Duration>,
    start: Vec<Duration>,
    total: Vec<Duration>,
}

fn median(values: &[Duration]) -> Duration {
    let mut sorted = values.to_vec();
    sorted.sort();
    sorted[sorted.len() / 2]
}

fn ms(duration: Duration) -> String {
    format!("{:.1}", duration.as_secs_f64() * 1000.0)
}

fn main() {
    let runs = integration_tests::bench_runs(9);
    let mut rig = Rig::start(&RigOptions {
        channel_count: 2048,
    });
    let mut cases = [
        Case {
            label: "no annotation",
            annotation: None,
            devices: 0,
            create: vec![],
            start: vec![],
            total: vec![],
        },
        Case {
            label: "`imex-channels: \"0\"`",
            annotation: Some("0"),
            devices: 1,
            create: vec![],
            start: vec![],
            total: vec![],
        },
        Case {
            label: "`imex-channels: \"true\"`",
            annotation: Some("true"),
            devices: 2048,
            create: vec![],
            start: vec![],
            total: vec![],
        },
    ];
    let mut pods = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let name = format!("bench{index}");
        let annotations: Vec<(&str, &str)> = case
            .annotation
            .map(|value| (IMEX_ANNOTATION, value))
            .into_iter()
            .collect();
        let pod = rig.run_pod(&name, "cdsim-bench", &annotations);
        pods.push((pod, name));
    }
    // One warm-up container per case, not measured.
    for (pod, name) in &pods {
        let id = rig.run_container(pod, name, "warmup");
        rig.crictl(&["rm", "--force", &id]);
    }
    for run in 0..runs {
        for (case, (pod, name)) in cases.iter_mut().zip(&pods) {
            let (id, create) = rig.create_container(pod, name, &format!("run{run}"));
            let start = rig.start_container(&id);
            let (ok, stdout, stderr) =
                rig.exec(&id, "ls /dev/nvidia-caps-imex-channels 2>/dev/null | wc -l");
            assert!(ok, "{stderr}");
            assert_eq!(
                stdout.trim(),
                case.devices.to_string(),
                "{}: wrong number of channel devices",
                case.label
            );
            rig.crictl(&["rm", "--force", &id]);
            case.create.push(create);
            case.start.push(start);
            case.total.push(create + start);
        }
    }
    let runc = std::process::Command::new("runc")
        .arg("--version")
        .output()
        .map(|output| {
            String::from_utf8_lossy(&output.stdout)
                .lines()
                .next()
                .unwrap_or_default()
                .to_owned()
        })
        .unwrap_or_default();
    println!(
        "containerd {}, {runc}, {runs} runs per case (median, [min-max]) in ms:",
        harness::pin("node", "containerd")
    );
    println!();
    println!("| pod annotation | injected channel devices | CreateContainer | StartContainer | create + start |");
    println!("|---|---:|---:|---:|---:|");
    for case in &cases {
        let range = |values: &[Duration]| {
            let min = values.iter().min().copied().unwrap_or_default();
            let max = values.iter().max().copied().unwrap_or_default();
            format!("{} [{}-{}]", ms(median(values)), ms(min), ms(max))
        };
        println!(
            "| {} | {} | {} | {} | {} |",
            case.label,
            case.devices,
            range(&case.create),
            range(&case.start),
            range(&case.total)
        );
    }
    for (pod, _) in pods {
        rig.remove_pod(&pod);
    }
}
