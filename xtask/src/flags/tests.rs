//! The command line as clap parses it: defaults, the checks made at parse
//! time and what a refused value says.

use super::cluster::{check_profile, imex_path};
use super::*;

fn parse(args: &[&str]) -> Xtask {
    let mut argv = vec!["cargo xtask"];
    argv.extend_from_slice(args);
    Xtask::try_parse_from(argv).unwrap_or_else(|err| panic!("{args:?}: {err}"))
}

#[test]
fn scenarios_picks_the_ones_demo_runs_and_refuses_an_unknown_number() {
    use harness::scenarios::Scenario;
    let Command::Demo(all) = parse(&["demo"]).command else {
        panic!("demo");
    };
    assert!(Scenario::ALL.into_iter().all(|which| all.asks_for(which)));
    let Command::Demo(some) = parse(&["demo", "--scenarios", "1,3,4"]).command else {
        panic!("demo");
    };
    let asked: Vec<u8> = Scenario::ALL
        .into_iter()
        .filter(|which| some.asks_for(*which))
        .map(|which| which.number())
        .collect();
    assert_eq!(asked, [1, 3, 4]);
    let err = Xtask::try_parse_from(["cargo xtask", "demo", "--scenarios", "1,7"])
        .expect_err("scenario 7 refused")
        .to_string();
    assert!(
        err.contains("no scenario \"7\": the scenarios are 1, 2, 3, 4"),
        "{err}"
    );
}

#[test]
fn profile_defaults_to_gb200_and_takes_any_shipped_one() {
    for (command, args) in [("up", &["up"][..]), ("demo", &["demo"][..])] {
        let (Command::Up(parsed) | Command::Demo(parsed)) = parse(args).command else {
            panic!("{command}");
        };
        assert_eq!(parsed.profile, "gb200", "{command}");
    }
    let shipped = harness::profiles::names().expect("the shipped profiles");
    assert_eq!(
        shipped,
        ["a100", "b200", "gb200", "gb300", "h100", "l40s", "t4"],
        "the chart's profiles"
    );
    for name in &shipped {
        for command in ["up", "demo"] {
            let (Command::Up(parsed) | Command::Demo(parsed)) =
                parse(&[command, "--profile", name]).command
            else {
                panic!("{command}");
            };
            assert_eq!(&parsed.profile, name, "{command}");
        }
    }
}

#[test]
fn an_unknown_profile_fails_at_parse_time_listing_the_shipped_ones() {
    let err = Xtask::try_parse_from(["cargo xtask", "up", "--profile", "v100"])
        .expect_err("v100 is not shipped")
        .to_string();
    assert!(
        err.contains(
            "no GPU profile \"v100\": the chart ships a100, b200, gb200, gb300, h100, l40s, t4"
        ),
        "{err}"
    );
    let none = check_profile("gb200", &[]).expect_err("nothing shipped");
    assert!(none.contains("the chart ships none"), "{none}");
    assert_eq!(
        check_profile("t4", &["gb200".to_owned(), "t4".to_owned()]),
        Ok("t4".to_owned())
    );
}

#[test]
fn force_recreate_comes_from_the_flag_or_the_environment() {
    let Command::Up(args) = parse(&["up", "--force-recreate"]).command else {
        panic!("up");
    };
    assert!(args.force_recreate);
    // The only test touching FORCE_RECREATE.
    std::env::set_var("FORCE_RECREATE", "true");
    let Command::Demo(on) = parse(&["demo"]).command else {
        panic!("demo");
    };
    std::env::set_var("FORCE_RECREATE", "false");
    let Command::Demo(off) = parse(&["demo"]).command else {
        panic!("demo");
    };
    std::env::remove_var("FORCE_RECREATE");
    assert!(on.force_recreate, "FORCE_RECREATE=true");
    assert!(!off.force_recreate, "FORCE_RECREATE=false");
}

#[test]
fn scenarios_take_a_context_and_a_report() {
    let Command::Scenario3(args) = parse(&[
        "scenario3",
        "--kube-context",
        "prod",
        "--report",
        "r.json",
        "-v",
    ])
    .command
    else {
        panic!("scenario3");
    };
    assert_eq!(args.cluster.kube_context.as_deref(), Some("prod"));
    assert_eq!(args.cluster.cluster_name, "nvml-mock-compute-domain");
    assert_eq!(args.report.as_deref(), Some(std::path::Path::new("r.json")));
}

#[test]
fn scenario5_takes_a_registry_with_a_context_and_inject_a_context() {
    let Command::Scenario5(args) = parse(&[
        "scenario5",
        "--kube-context",
        "prod",
        "--registry",
        "172.18.0.1:5000/ci",
        "--plain-http",
    ])
    .command
    else {
        panic!("scenario5");
    };
    assert_eq!(args.scenario.cluster.kube_context.as_deref(), Some("prod"));
    let registry = args.push.parsed().expect("valid").expect("given");
    assert_eq!(registry.host, "172.18.0.1:5000");
    assert!(registry.plain_http);
    let Command::Scenario5(kind) = parse(&["scenario5", "--cluster-name", "c"]).command else {
        panic!("scenario5");
    };
    assert!(kind.push.parsed().expect("valid").is_none());
    for argv in [
        &["scenario5", "--registry", "r:5000"][..],
        &["scenario1", "--kube-context", "p", "--registry", "r:5000"],
        &["scenario5", "--kube-context", "p", "--registry", "http://r"],
    ] {
        let mut full = vec!["cargo xtask"];
        full.extend_from_slice(argv);
        assert!(Xtask::try_parse_from(full).is_err(), "{argv:?} accepted");
    }
    let Command::Inject(inject) = parse(&[
        "inject",
        "--kube-context",
        "prod",
        "--node",
        "w1",
        "--clear",
    ])
    .command
    else {
        panic!("inject");
    };
    assert_eq!(inject.kube_context.as_deref(), Some("prod"));
}

#[test]
fn inject_takes_an_ecc_error_with_a_clear_error_on_bad_input() {
    let Command::Inject(inject) =
        parse(&["inject", "--node", "w1", "--gpu", "2", "--ecc", "double"]).command
    else {
        panic!("inject");
    };
    assert_eq!(
        inject.action(),
        crate::inject::XidAction::Ecc {
            gpu: 2,
            ecc: node_layout::xid::Ecc::Double
        }
    );
    let fails = |args: &[&str]| {
        let mut full = vec!["cargo xtask", "inject", "--node", "w1"];
        full.extend_from_slice(args);
        Xtask::try_parse_from(full)
            .err()
            .map(|err| err.to_string())
            .unwrap_or_default()
    };
    let err = fails(&["--gpu", "1", "--ecc", "triple"]);
    assert!(
        err.contains("invalid value 'triple' for '--ecc <ECC>'")
            && err.contains("use `single` (corrected) or `double` (uncorrected)"),
        "{err}"
    );
    assert!(
        fails(&["--gpu", "1", "--xid", "79", "--ecc", "single"]).contains("cannot be used with")
    );
    assert!(!fails(&["--ecc", "single"]).is_empty(), "--ecc needs --gpu");
    assert!(
        !fails(&["--gpu", "1"]).is_empty(),
        "--gpu needs --xid or --ecc"
    );
}

#[test]
fn a_missing_imex_path_fails_at_parse_time_naming_it() {
    let err = Xtask::try_parse_from(["cargo xtask", "scenario2", "--imex", "/nonexistent"])
        .expect_err("no such path")
        .to_string();
    assert!(err.contains("/nonexistent"), "{err}");
    assert!(err.contains("No such file or directory"), "{err}");
    assert!(
        err.contains("pass NVIDIA's nvidia-imex redistributable"),
        "{err}"
    );
    let dir = tempfile::tempdir().expect("tempdir");
    let archive = dir.path().join("imex.tar.xz");
    std::fs::write(&archive, "").expect("write");
    for path in [dir.path(), archive.as_path()] {
        let path = path.to_str().expect("utf-8");
        let Command::Scenario2(args) = parse(&["scenario2", "--imex", path]).command else {
            panic!("scenario2");
        };
        assert_eq!(args.imex.as_deref(), Some(std::path::Path::new(path)));
    }
    let err = imex_path("/dev/null").expect_err("a device");
    assert!(
        err.contains("neither a regular file nor a directory"),
        "{err}"
    );
}

fn layout_of(args: &[&str]) -> Result<topology::Layout, String> {
    let mut argv = vec!["cargo xtask"];
    argv.extend_from_slice(args);
    let parsed = Xtask::try_parse_from(argv)
        .and_then(Xtask::checked)
        .map_err(|err| err.to_string())?;
    let (Command::Up(args) | Command::Demo(args)) = parsed.command else {
        panic!("up or demo");
    };
    Ok(args.layout.layout().expect("checked"))
}

#[test]
fn the_layout_defaults_to_todays_demo_and_takes_racks_of_trays() {
    for command in ["up", "demo"] {
        assert_eq!(layout_of(&[command]), Ok(topology::Layout::default()));
    }
    let full = layout_of(&["demo", "--trays", "18", "--cliques-per-rack", "1"]).expect("18");
    assert_eq!(
        (full.trays(), full.racks(), full.cliques_per_rack()),
        (18, 1, 1)
    );
    let two = layout_of(&["up", "--trays", "2", "--racks", "2"]).expect("2x2");
    assert_eq!((two.workers(), two.cliques_per_rack()), (4, 2));
    let single = layout_of(&["up", "--trays", "1", "--racks", "3"]).expect("1x3");
    assert_eq!(single.cliques_per_rack(), 1, "one tray, one clique");
}

#[test]
fn a_bad_layout_fails_at_parse_time_saying_what_to_pass() {
    for (args, want) in [
        (
            &["up", "--trays", "0"][..],
            "a rack holds 1 to 18 compute trays",
        ),
        (&["up", "--trays", "19"][..], "pass --trays 1..18"),
        (&["up", "--trays", "x"][..], "pass a whole number"),
        (
            &["demo", "--racks", "9"][..],
            "--racks 9: pass 1 to 8 racks",
        ),
        (
            &["demo", "--cliques-per-rack", "0"][..],
            "--cliques-per-rack",
        ),
        (
            &["demo", "--trays", "3", "--cliques-per-rack", "4"][..],
            "a rack of 3 trays splits into 1 to 3 cliques; pass --cliques-per-rack 1..3",
        ),
        (
            &["up", "--kube-context", "x", "--trays", "2"][..],
            "cannot be used with",
        ),
    ] {
        let err = layout_of(args).expect_err(want);
        assert!(err.contains(want), "{args:?}: {err}");
    }
}

#[test]
fn kind_only_commands_do_not_accept_a_kube_context() {
    for command in ["doctor", "faults", "down"] {
        let res = Xtask::try_parse_from(["cargo xtask", command, "--kube-context", "x"]);
        assert!(
            res.is_err(),
            "{command} accepts --kube-context it would ignore"
        );
    }
    let Command::Status(args) = parse(&["status", "--kube-context", "x"]).command else {
        panic!("status");
    };
    assert_eq!(args.kube_context.as_deref(), Some("x"));
}

#[test]
fn report_takes_the_page_and_the_json_report() {
    let Command::Report(args) = parse(&["report", "--html", "o.html", "r.json"]).command else {
        panic!("report");
    };
    assert_eq!((args.html, args.json), ("o.html".into(), "r.json".into()));
    assert!(Xtask::try_parse_from(["cargo xtask", "report", "r.json"]).is_err());
}
