//! `nvidia-imex-double`: the IMEX TEST DOUBLE's daemon, installed as
//! `usr/bin/nvidia-imex` only inside the double's payload directory.
//!
//! `nvidia-imex [-c CONFIG] [-p|--port N] [--nogpu]` (see the crate docs).

use std::collections::BTreeSet;
use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::ExitCode;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use imex_double::config::{self, Config};
use imex_double::domain::{self, LocalState, Member, View};
use imex_double::nodes::{self, HostTable, Nodes};
use imex_double::{clock, wire, NO_GPU_VERSION};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;

#[path = "daemon/log.rs"]
mod log;
#[path = "daemon/signals.rs"]
mod signals;

use log::{log_startup, open_log, Log, NAME};

use signals::{startup_hold, Signals};

const DAEMONIZED_ENV: &str = "IMEX_DOUBLE_DAEMONIZED";

struct Args {
    config: String,
    port: Option<u16>,
    nogpu: bool,
}

fn parse_args() -> Result<Args, String> {
    let mut args = Args {
        config: config::DEFAULT_PATH.to_owned(),
        port: None,
        nogpu: false,
    };
    let mut it = std::env::args().skip(1);
    while let Some(arg) = it.next() {
        match arg.as_str() {
            "-c" | "--config" => args.config = it.next().ok_or("-c needs a path")?,
            "-p" | "--port" => {
                let value = it.next().ok_or("-p needs a port")?;
                args.port = Some(
                    value
                        .parse()
                        .map_err(|_| format!("-p {value}: not a port"))?,
                );
            }
            "--nogpu" | "-nogpu" => args.nogpu = true,
            other => {
                return Err(format!(
                    "unknown option {other}; usage: nvidia-imex [-c CONFIG] [-p PORT] [--nogpu]"
                ))
            }
        }
    }
    Ok(args)
}

fn main() -> ExitCode {
    match parse_args().and_then(run) {
        Ok(()) => ExitCode::SUCCESS,
        Err(msg) => {
            eprintln!("{NAME}: {msg}");
            ExitCode::FAILURE
        }
    }
}

/// Shared daemon state.
struct Shared {
    own: usize,
    own_addr: IpAddr,
    hosts: HostTable,
    /// Bumped on SIGUSR1: every connection loop retries at once. A count a
    /// loop compares, not a wake-up of the loops waiting at that moment: a
    /// signal that lands while a loop resolves or dials is not lost.
    retry: watch::Sender<u64>,
    digest: String,
    server_port: u16,
    state: Mutex<LocalState>,
    links: Mutex<Vec<u32>>,
    /// What each linked peer said of itself in its last `PING`; `None` while
    /// no link to it is up.
    views: Mutex<Vec<Option<View>>>,
    log: Log,
}

impl Shared {
    fn view(&self) -> View {
        let links = self.links.lock().map(|it| it.clone()).unwrap_or_default();
        View {
            state: self
                .state
                .lock()
                .map(|it| *it)
                .unwrap_or(LocalState::Unavailable),
            version: NO_GPU_VERSION.to_owned(),
            connected: links
                .iter()
                .enumerate()
                .filter(|(_, n)| **n > 0)
                .map(|(idx, _)| idx)
                .collect::<BTreeSet<usize>>(),
        }
    }

    /// A peer for the log: its address, or its name while that does not resolve.
    fn describe(&self, peer: usize) -> String {
        match self.hosts.get(peer) {
            Some(ip) => ip.to_string(),
            None => self.hosts.entries()[peer].clone(),
        }
    }

    /// Records what `peer` said of itself (`None`: nothing, its links are down).
    fn heard(&self, peer: usize, view: Option<View>) {
        if let Ok(mut views) = self.views.lock() {
            views[peer] = view;
        }
    }

    fn link(&self, peer: usize, delta: i32) -> u32 {
        let mut links = match self.links.lock() {
            Ok(links) => links,
            Err(_) => return 0,
        };
        let before = links[peer];
        links[peer] = before.saturating_add_signed(delta);
        let after = links[peer];
        drop(links);
        if after == 0 {
            self.heard(peer, None);
        }
        match (before, after) {
            (0, 1..) => self.log.info(&format!(
                "Connection to node #{peer} ({}) established",
                self.describe(peer)
            )),
            (1.., 0) => self.log.warn(&format!(
                "Connection to node #{peer} ({}) lost",
                self.describe(peer)
            )),
            _ => {}
        }
        after
    }
}

fn run(args: Args) -> Result<(), String> {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start: {e}"))?;
    let signals = {
        let _inside = runtime.enter();
        Signals::register()?
    };
    let cfg = Config::read(&args.config).map_err(|e| e.to_string())?;
    if !args.nogpu {
        return Err(imex_double::no_gpu_mode_required());
    }
    if cfg.daemonize().map_err(|e| e.to_string())? && std::env::var_os(DAEMONIZED_ENV).is_none() {
        // DAEMONIZE=1: continue in the background, as the real daemon forks.
        return daemonize();
    }
    let log = open_log(&cfg)?;
    log_startup(&cfg, &log);
    startup_hold();
    let server_port = args
        .port
        .map_or_else(|| cfg.server_port(), Ok)
        .map_err(|e| e.to_string())?;
    let cmd_port = cfg.cmd_port().map_err(|e| e.to_string())?;
    let nodes_path = cfg.nodes_file().to_owned();
    let (nodes, hosts) = read_nodes(&nodes_path, &log)?;
    let bind = cfg.bind_ip().map_err(|e| e.to_string())?;
    let own = nodes::own_index(&hosts.snapshot(), bind);
    let Some((own, own_addr)) = own.and_then(|own| Some((own, hosts.get(own)?))) else {
        let msg = "No matching network interface found for any IP addresses in the node configuration file";
        log.at(1, "CRITICAL", msg);
        return Err(format!("{msg} {nodes_path}"));
    };
    log.info(&format!("Identified this node as ID {own}"));
    imex_double::write_persist(&nodes.digest)?;
    let Some(cmd_port) = cmd_port else {
        log.warn("IMEX_CMD_ENABLED=0: nvidia-imex-ctl cannot reach this daemon");
        return Err(
            "the IMEX test double needs the command service (IMEX_CMD_ENABLED=1)".to_owned(),
        );
    };
    let cmd_ip = cfg
        .cmd_bind_ip()
        .map_err(|e| e.to_string())?
        .unwrap_or(IpAddr::V4(Ipv4Addr::UNSPECIFIED));
    let shared = Arc::new(Shared {
        own,
        own_addr,
        links: Mutex::new(vec![0; hosts.entries().len()]),
        views: Mutex::new(vec![None; hosts.entries().len()]),
        hosts,
        retry: watch::Sender::new(0),
        digest: nodes.digest,
        server_port,
        state: Mutex::new(LocalState::Initializing),
        log,
    });
    runtime.block_on(serve(shared, signals, SocketAddr::new(cmd_ip, cmd_port)))
}

/// Starts this program again in the background, detached from the terminal.
fn daemonize() -> Result<(), String> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
    std::process::Command::new(exe)
        .args(std::env::args_os().skip(1))
        .env(DAEMONIZED_ENV, "1")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .map_err(|e| format!("cannot daemonize: {e}"))?;
    Ok(())
}

/// The nodes file and the address of each entry, in order (a host name that
/// does not resolve yet waits in the table).
fn read_nodes(nodes_path: &str, log: &Log) -> Result<(Nodes, HostTable), String> {
    let text = std::fs::read_to_string(nodes_path)
        .map_err(|e| format!("Failed to read node configuration file {nodes_path}: {e}"))?;
    let nodes = Nodes::parse(&text);
    if nodes.entries.is_empty() {
        return Err(format!(
            "Failed to read node configuration file {nodes_path}: no entries"
        ));
    }
    for entry in &nodes.entries {
        if entry.parse::<IpAddr>().is_err() {
            log.info(&format!(
                "Treating node config entry '{entry}' as a host name."
            ));
        }
    }
    let hosts = HostTable::new(nodes.entries.clone());
    for (entry, addr) in hosts.entries().iter().zip(hosts.snapshot()) {
        if addr.is_none() {
            log.info(&format!(
                "node config entry '{entry}' does not resolve yet; retrying before each connection"
            ));
        }
    }
    Ok((nodes, hosts))
}

async fn serve(
    shared: Arc<Shared>,
    mut signals: Signals,
    cmd_addr: SocketAddr,
) -> Result<(), String> {
    let peer_addr = SocketAddr::new(shared.own_addr, shared.server_port);
    let peers = TcpListener::bind(peer_addr)
        .await
        .map_err(|e| format!("cannot listen on {peer_addr} (SERVER_PORT): {e}"))?;
    let cmds = TcpListener::bind(cmd_addr)
        .await
        .map_err(|e| format!("cannot listen on {cmd_addr} (IMEX_CMD_PORT): {e}"))?;
    let (stop_tx, stop_rx) = watch::channel(false);

    tokio::spawn(accept_peers(peers, shared.clone(), stop_rx.clone()));
    tokio::spawn(accept_cmds(cmds, shared.clone()));
    for peer in 0..shared.hosts.entries().len() {
        if peer != shared.own {
            tokio::spawn(connect_peer(peer, shared.clone(), stop_rx.clone()));
        }
    }
    if let Ok(mut state) = shared.state.lock() {
        *state = LocalState::Ready;
    }
    shared.log.info(&format!(
        "listening for peers on {peer_addr} and for commands on {cmd_addr}; state READY"
    ));
    let signal_name = loop {
        tokio::select! {
            _ = signals.term.recv() => break "SIGTERM",
            _ = signals.int.recv() => break "SIGINT",
            _ = signals.quit.recv() => break "SIGQUIT",
            _ = signals.usr1.recv() => {
                shared.log.info("SIGUSR1: restarting outgoing connections");
                shared.retry.send_modify(|it| *it += 1);
            }
            _ = signals.hup.recv() => shared.log.info("SIGHUP: nothing buffered to dump"),
        }
    };
    shared.log.info(&format!(
        "{signal_name} received: shutting down, notifying peers"
    ));
    if let Ok(mut state) = shared.state.lock() {
        *state = LocalState::ShuttingDown;
    }
    let _ = stop_tx.send(true);
    // Let the links send BYE.
    tokio::time::sleep(Duration::from_millis(200)).await;
    shared.log.info("shutdown complete");
    Ok(())
}

async fn read_line(reader: &mut BufReader<TcpStream>, limit: Duration) -> Option<String> {
    let mut line = String::new();
    match tokio::time::timeout(limit, reader.read_line(&mut line)).await {
        Ok(Ok(n)) if n > 0 => Some(line.trim().to_owned()),
        _ => None,
    }
}

async fn accept_peers(listener: TcpListener, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    while let Ok((stream, from)) = listener.accept().await {
        let shared = shared.clone();
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stream);
            let Some(line) = read_line(&mut reader, Duration::from_secs(5)).await else {
                return;
            };
            let Some((peer, digest)) = wire::parse_hello(&line) else {
                shared
                    .log
                    .warn(&format!("{from}: not a peer greeting: {line:?}"));
                return;
            };
            if digest != shared.digest || peer >= shared.hosts.entries().len() || peer == shared.own
            {
                shared.log.warn(&format!(
                    "{from} (node #{peer}): node map mismatch (!M!), connection refused"
                ));
                let _ = reader
                    .get_mut()
                    .write_all(format!("{}\n", wire::MISMATCH).as_bytes())
                    .await;
                return;
            }
            // A peer that dialled first may have a name this member has not
            // resolved yet: its address, for the domain document.
            // Still unresolved: the address its link comes from (pod to pod,
            // no translation).
            let table = shared.clone();
            let _ = tokio::task::spawn_blocking(move || table.hosts.refresh(peer)).await;
            shared.hosts.learn(peer, from.ip());
            let welcome = format!("{} {}\n", wire::WELCOME, shared.own);
            if reader
                .get_mut()
                .write_all(welcome.as_bytes())
                .await
                .is_err()
            {
                return;
            }
            link(reader, peer, &shared, stop).await;
        });
    }
}

/// One live peer connection: PING (with the sender's view) both ways each
/// second, down after 5 s of silence, on EOF or on BYE; BYE on shutdown.
async fn link(
    mut reader: BufReader<TcpStream>,
    peer: usize,
    shared: &Shared,
    mut stop: watch::Receiver<bool>,
) {
    shared.link(peer, 1);
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        let mut line = String::new();
        tokio::select! {
            read = tokio::time::timeout(Duration::from_secs(5), reader.read_line(&mut line)) => {
                match read {
                    Ok(Ok(n)) if n > 0 && line.trim() != wire::BYE => {
                        if let Some(view) = wire::parse_ping(line.trim()) {
                            shared.heard(peer, Some(view));
                        }
                    }
                    _ => break,
                }
            }
            _ = tick.tick() => {
                if reader.get_mut().write_all(wire::ping(&shared.view()).as_bytes()).await.is_err() {
                    break;
                }
            }
            _ = stop.changed() => {
                let _ = reader.get_mut().write_all(format!("{}\n", wire::BYE).as_bytes()).await;
                break;
            }
        }
    }
    shared.link(peer, -1);
}

async fn connect_peer(peer: usize, shared: Arc<Shared>, stop: watch::Receiver<bool>) {
    let base = std::env::var(imex_double::BACKOFF_ENV)
        .ok()
        .and_then(|it| it.parse::<u64>().ok())
        .map_or(Duration::from_secs(15), Duration::from_millis);
    let mut delay = base;
    let mut retry = shared.retry.subscribe();
    loop {
        if *stop.borrow() {
            return;
        }
        let connected = shared.links.lock().map(|it| it[peer] > 0).unwrap_or(false);
        if connected {
            // A peer that dialled in before its name resolved here: its
            // address once it does, for the domain document.
            if shared.hosts.get(peer).is_none() {
                let shared = shared.clone();
                let _ = tokio::task::spawn_blocking(move || shared.hosts.refresh(peer)).await;
            }
            tokio::time::sleep(Duration::from_millis(500)).await;
            continue;
        }
        // The name again before each attempt: a replaced peer has a new address.
        // A SIGUSR1 from here on wakes the wait below at once.
        retry.borrow_and_update();
        let resolved = {
            let shared = shared.clone();
            tokio::task::spawn_blocking(move || shared.hosts.refresh(peer))
                .await
                .unwrap_or((None, false))
        };
        let attempt = match resolved {
            (Some(ip), _) => handshake(SocketAddr::new(ip, shared.server_port), &shared).await,
            (None, _) => Err("its name does not resolve".to_owned()),
        };
        match attempt {
            Ok(reader) => {
                link(reader, peer, &shared, stop.clone()).await;
                delay = base;
            }
            Err(err) => {
                if resolved.0.is_some() {
                    shared.log.info(&format!(
                        "node #{peer} ({}) not reachable ({err}); retrying in {}s",
                        shared.describe(peer),
                        delay.as_secs_f64()
                    ));
                }
                let mut stop = stop.clone();
                tokio::select! {
                    _ = tokio::time::sleep(delay) => delay = delay * 2 + Duration::from_secs(1),
                    // SIGUSR1: the mapping changed, retry now and from the start.
                    _ = retry.changed() => delay = base,
                    _ = stop.changed() => return,
                }
            }
        }
    }
}

async fn handshake(addr: SocketAddr, shared: &Shared) -> Result<BufReader<TcpStream>, String> {
    let stream = tokio::time::timeout(Duration::from_secs(3), TcpStream::connect(addr))
        .await
        .map_err(|_| "connect timed out".to_owned())?
        .map_err(|e| e.to_string())?;
    let mut reader = BufReader::new(stream);
    reader
        .get_mut()
        .write_all(wire::hello(shared.own, &shared.digest).as_bytes())
        .await
        .map_err(|e| e.to_string())?;
    match read_line(&mut reader, Duration::from_secs(5)).await {
        Some(line) if line.starts_with(wire::WELCOME) => Ok(reader),
        Some(line) if line.starts_with(wire::MISMATCH) => {
            Err("node map mismatch (!M!): the nodes files differ".to_owned())
        }
        other => Err(format!("no greeting ({other:?})")),
    }
}

async fn accept_cmds(listener: TcpListener, shared: Arc<Shared>) {
    while let Ok((stream, _)) = listener.accept().await {
        let shared = shared.clone();
        tokio::spawn(async move {
            let mut reader = BufReader::new(stream);
            let Some(line) = read_line(&mut reader, Duration::from_secs(5)).await else {
                return;
            };
            let answer = match line.as_str() {
                wire::QUERY => format!("{}\n", shared.view().state.word()),
                wire::VIEW => serde_json::to_string(&shared.view()).unwrap_or_default() + "\n",
                wire::DOMAIN_JSON | wire::DOMAIN_TEXT => {
                    let doc = domain::document(&members(&shared), clock::now());
                    match line.as_str() {
                        wire::DOMAIN_JSON => {
                            serde_json::to_string_pretty(&doc).unwrap_or_default() + "\n"
                        }
                        _ => domain::text(&doc),
                    }
                }
                other => format!("ERROR unknown request {other:?}\n"),
            };
            let _ = reader.get_mut().write_all(answer.as_bytes()).await;
        });
    }
}

/// Every member's view: ours, and each linked peer's from its last `PING`
/// (a peer with no link up is not reachable from here: UNAVAILABLE).
fn members(shared: &Shared) -> Vec<Member> {
    let hosts = shared.hosts.snapshot();
    let mut views = shared.views.lock().map(|it| it.clone()).unwrap_or_default();
    views.resize(hosts.len(), None);
    views[shared.own] = Some(shared.view());
    hosts
        .iter()
        .zip(views)
        .map(|(ip, view)| Member {
            host: ip.map(|it| it.to_string()),
            view,
        })
        .collect()
}
