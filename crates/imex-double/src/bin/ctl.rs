//! `nvidia-imex-ctl-double`: the IMEX TEST DOUBLE's ctl, installed as
//! `usr/bin/nvidia-imex-ctl` only inside the double's payload directory.
//!
//! `nvidia-imex-ctl [-c CONFIG | -i IP PORT] (-q | -N | -n) [-j] [-H]`.

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::time::Duration;

use imex_double::config::{self, Config};
use imex_double::{wire, CTL_FAULT_ENV, MARKER};

const NAME: &str = "nvidia-imex-ctl (IMEX test double)";

#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    Query,
    Domain,
    Monitor,
}

enum Target {
    Config(String),
    Direct(SocketAddr),
}

struct Args {
    target: Target,
    mode: Mode,
    json: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut target = Target::Config(config::DEFAULT_PATH.to_owned());
    let mut mode = None;
    let mut json = false;
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-c" => target = Target::Config(it.next().ok_or("-c needs a path")?),
            "-i" => {
                let ip: IpAddr = it
                    .next()
                    .ok_or("-i needs an IP and a port")?
                    .parse()
                    .map_err(|_| "-i: not an IP address")?;
                let port: u16 = it
                    .next()
                    .ok_or("-i needs an IP and a port")?
                    .parse()
                    .map_err(|_| "-i: not a port")?;
                target = Target::Direct(SocketAddr::new(ip, port));
            }
            "-q" => mode = Some(Mode::Query),
            "-N" => mode = Some(Mode::Domain),
            "-n" => mode = Some(Mode::Monitor),
            "-j" => json = true,
            "-H" => {}
            "--version" => return Err(format!("version: {MARKER}")),
            other => {
                return Err(format!(
                    "option {other} is not supported by the IMEX test double; usage: \
                     nvidia-imex-ctl [-c CONFIG | -i IP PORT] (-q | -N | -n) [-j] [-H]"
                ))
            }
        }
    }
    let mode = mode.ok_or("one of -q, -N, -n is required")?;
    Ok(Args { target, mode, json })
}

fn main() -> ExitCode {
    match std::env::var(CTL_FAULT_ENV).as_deref() {
        Ok("hang") => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Ok("fail") => {
            eprintln!("{NAME}: injected failure ({CTL_FAULT_ENV}=fail)");
            return ExitCode::FAILURE;
        }
        Ok("garbage") => {
            println!("injected garbage, not JSON ({CTL_FAULT_ENV}=garbage)");
            return ExitCode::SUCCESS;
        }
        _ => {}
    }
    let args = match parse_args() {
        Ok(args) => args,
        Err(msg) => {
            eprintln!("{NAME}: {msg}");
            return ExitCode::FAILURE;
        }
    };
    match run(&args) {
        Ok(code) => code,
        Err((code, msg)) => {
            eprintln!("{msg}");
            ExitCode::from(code)
        }
    }
}

fn run(args: &Args) -> Result<ExitCode, (u8, String)> {
    let addr = match &args.target {
        Target::Direct(addr) => *addr,
        Target::Config(path) => {
            let cfg = Config::read(path).map_err(|e| (1, format!("{NAME}: {e}")))?;
            if args.mode != Mode::Query {
                let nodes = cfg.nodes_file().to_owned();
                if std::fs::read_to_string(&nodes).is_err() {
                    return Err((
                        255,
                        format!("Failed to read node configuration file {nodes}"),
                    ));
                }
            }
            let port = cfg
                .cmd_port()
                .map_err(|e| (1, format!("{NAME}: {e}")))?
                .ok_or((
                    1,
                    format!(
                        "{NAME}: the command service is disabled (IMEX_CMD_ENABLED=0) in {path}"
                    ),
                ))?;
            let ip = cfg
                .cmd_bind_ip()
                .map_err(|e| (1, format!("{NAME}: {e}")))?
                .unwrap_or(IpAddr::V4(Ipv4Addr::LOCALHOST));
            SocketAddr::new(ip, port)
        }
    };
    let limit = Duration::from_secs(5);
    let unreachable = |e: std::io::Error| {
        (
            1,
            format!("{NAME}: cannot reach the IMEX command service at {addr}: {e}"),
        )
    };
    match args.mode {
        Mode::Query => match wire::request(addr, wire::QUERY, limit) {
            Ok(answer) => {
                print!("{answer}");
                Ok(ExitCode::SUCCESS)
            }
            Err(err) => {
                println!("UNAVAILABLE");
                Err(unreachable(err))
            }
        },
        Mode::Domain | Mode::Monitor => loop {
            let request = if args.json {
                wire::DOMAIN_JSON
            } else {
                wire::DOMAIN_TEXT
            };
            let answer = wire::request(addr, request, limit).map_err(unreachable)?;
            print!("{answer}");
            if args.mode == Mode::Domain {
                return Ok(ExitCode::SUCCESS);
            }
            std::thread::sleep(Duration::from_secs(1));
        },
    }
}
