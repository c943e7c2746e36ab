//! Liveness and readiness: the shared state, its assessment, and a tiny HTTP/1.1 responder.
//!
//! | route | 200 `ok` | 503 |
//! |---|---|---|
//! | `/healthz` | not wedged | wedged |
//! | `/readyz` | synchronized with the runtime and not wedged | not registered, or wedged |
//!
//! Wedged means a CreateContainer request has been in flight longer than twice
//! the runtime's request timeout. Anything else is 404.
//! The responder reads one request head (at most 8 KiB, within 5 s), answers
//! and closes; it needs nothing more, so it is a few lines on tokio rather than
//! a dependency on hyper.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The runtime's default request timeout, used until Configure says otherwise.
pub const DEFAULT_REQUEST_TIMEOUT: Duration = Duration::from_secs(2);

/// The plugin's registration and in-flight requests.
#[derive(Debug)]
pub struct Health {
    registered: AtomicBool,
    request_timeout_ms: AtomicU64,
    next_request: AtomicU64,
    in_flight: Mutex<BTreeMap<u64, Instant>>,
}

impl Default for Health {
    fn default() -> Self {
        Self {
            registered: AtomicBool::new(false),
            request_timeout_ms: AtomicU64::new(DEFAULT_REQUEST_TIMEOUT.as_millis() as u64),
            next_request: AtomicU64::new(0),
            in_flight: Mutex::new(BTreeMap::new()),
        }
    }
}

/// Tracks one request from creation to drop.
#[derive(Debug)]
pub struct InFlight<'a> {
    health: &'a Health,
    id: u64,
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        if let Ok(mut in_flight) = self.health.in_flight.lock() {
            in_flight.remove(&self.id);
        }
    }
}

impl Health {
    /// Marks the plugin registered (synchronized) or not (connection lost).
    pub fn set_registered(&self, registered: bool) {
        self.registered.store(registered, Ordering::SeqCst);
    }

    /// Adopts the runtime's request timeout in milliseconds; zero or less keeps the default.
    pub fn set_request_timeout_ms(&self, millis: i64) {
        let millis = match u64::try_from(millis) {
            Ok(millis) if millis > 0 => millis,
            _ => DEFAULT_REQUEST_TIMEOUT.as_millis() as u64,
        };
        self.request_timeout_ms.store(millis, Ordering::SeqCst);
    }

    /// The runtime's request timeout.
    pub fn request_timeout(&self) -> Duration {
        Duration::from_millis(self.request_timeout_ms.load(Ordering::SeqCst))
    }

    /// Starts tracking a request until the returned guard drops.
    pub fn begin(&self) -> InFlight<'_> {
        let id = self.next_request.fetch_add(1, Ordering::SeqCst);
        if let Ok(mut in_flight) = self.in_flight.lock() {
            in_flight.insert(id, Instant::now());
        }
        InFlight { health: self, id }
    }

    /// The current verdict.
    pub fn assess(&self, now: Instant) -> Verdict {
        let oldest = self.in_flight.lock().ok().and_then(|in_flight| {
            in_flight
                .values()
                .min()
                .map(|started| now.saturating_duration_since(*started))
        });
        assess(
            self.registered.load(Ordering::SeqCst),
            oldest,
            self.request_timeout(),
        )
    }
}

/// The answers of the two probes: `Ok` or the 503 body.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Verdict {
    /// `/healthz`.
    pub live: Result<(), String>,
    /// `/readyz`.
    pub ready: Result<(), String>,
}

/// Decides the probes from the registration, the oldest in-flight request's age and the timeout.
pub fn assess(registered: bool, oldest: Option<Duration>, request_timeout: Duration) -> Verdict {
    let limit = request_timeout * 2;
    let wedged = oldest.filter(|age| *age > limit).map(|age| {
        format!("wedged: a container request has been in flight for {age:.1?}, past the {limit:?} threshold")
    });
    let live = match &wedged {
        Some(message) => Err(message.clone()),
        None => Ok(()),
    };
    let ready = match (wedged, registered) {
        (Some(message), _) => Err(message),
        (None, false) => Err(
            "not registered with the container runtime; new containers are not being injected"
                .to_owned(),
        ),
        (None, true) => Ok(()),
    };
    Verdict { live, ready }
}

/// Resolves `--health-addr`: empty disables, `:port` listens on every address.
pub fn parse_addr(addr: &str) -> Result<Option<SocketAddr>, String> {
    let addr = addr.trim();
    if addr.is_empty() {
        return Ok(None);
    }
    let full = if addr.starts_with(':') {
        format!("0.0.0.0{addr}")
    } else {
        addr.to_owned()
    };
    match full.parse::<SocketAddr>() {
        Ok(parsed) => Ok(Some(parsed)),
        Err(_) => Err(format!("invalid health address {addr:?}: use `:8080`, `127.0.0.1:8080` or an empty value to disable")),
    }
}

/// Answers probes forever.
pub async fn serve(listener: TcpListener, health: Arc<Health>) {
    loop {
        match listener.accept().await {
            Ok((stream, _)) => {
                let health = health.clone();
                tokio::spawn(async move {
                    if let Err(err) = answer(stream, &health).await {
                        tracing::debug!("health probe connection failed: {err}");
                    }
                });
            }
            Err(err) => {
                tracing::warn!("health listener accept failed: {err}");
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        }
    }
}

/// The status line and body for a request line's path.
pub fn route(path: &str, verdict: Verdict) -> (&'static str, String) {
    let result = match path {
        "/healthz" => verdict.live,
        "/readyz" => verdict.ready,
        _ => return ("404 Not Found", "not found\n".to_owned()),
    };
    match result {
        Ok(()) => ("200 OK", "ok\n".to_owned()),
        Err(message) => ("503 Service Unavailable", format!("{message}\n")),
    }
}

async fn answer(mut stream: TcpStream, health: &Health) -> std::io::Result<()> {
    let mut head = Vec::with_capacity(512);
    let mut buffer = [0u8; 1024];
    let read_head = async {
        while !head.windows(4).any(|window| window == b"\r\n\r\n") && head.len() < 8192 {
            let n = stream.read(&mut buffer).await?;
            if n == 0 {
                break;
            }
            head.extend_from_slice(&buffer[..n]);
        }
        Ok::<(), std::io::Error>(())
    };
    if tokio::time::timeout(Duration::from_secs(5), read_head)
        .await
        .is_err()
    {
        return Ok(());
    }
    let text = String::from_utf8_lossy(&head);
    let path = text.split_whitespace().nth(1).unwrap_or("/");
    let path = path.split('?').next().unwrap_or(path);
    let (status, body) = route(path, health.assess(Instant::now()));
    let response = format!(
        "HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
    stream.write_all(response.as_bytes()).await?;
    stream.shutdown().await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verdicts() {
        let timeout = Duration::from_secs(2);
        let healthy = assess(true, Some(Duration::from_secs(4)), timeout);
        assert_eq!(
            healthy,
            Verdict {
                live: Ok(()),
                ready: Ok(())
            }
        );

        let unregistered = assess(false, None, timeout);
        assert_eq!(unregistered.live, Ok(()));
        assert!(unregistered
            .ready
            .as_ref()
            .is_err_and(|message| message.starts_with("not registered")));

        let wedged = assess(true, Some(Duration::from_millis(4001)), timeout);
        assert!(
            wedged
                .live
                .as_ref()
                .is_err_and(|message| message.contains("past the 4s threshold")),
            "{wedged:?}"
        );
        assert_eq!(wedged.live, wedged.ready);
    }

    #[test]
    fn routes() {
        let ok = || Verdict {
            live: Ok(()),
            ready: Err("no".to_owned()),
        };
        assert_eq!(route("/healthz", ok()), ("200 OK", "ok\n".to_owned()));
        assert_eq!(
            route("/readyz", ok()),
            ("503 Service Unavailable", "no\n".to_owned())
        );
        assert_eq!(route("/", ok()).0, "404 Not Found");
    }

    #[test]
    fn request_timeout_and_in_flight_tracking() {
        let health = Health::default();
        assert_eq!(health.request_timeout(), DEFAULT_REQUEST_TIMEOUT);
        health.set_request_timeout_ms(0);
        assert_eq!(health.request_timeout(), DEFAULT_REQUEST_TIMEOUT);
        health.set_request_timeout_ms(10);
        let guard = health.begin();
        let later = Instant::now() + Duration::from_millis(50);
        assert!(health.assess(later).live.is_err());
        drop(guard);
        assert!(health.assess(later).live.is_ok());
    }

    #[test]
    fn addresses() {
        assert_eq!(parse_addr(""), Ok(None));
        assert_eq!(
            parse_addr(":8080"),
            Ok(Some("0.0.0.0:8080".parse().expect("valid")))
        );
        assert_eq!(
            parse_addr("127.0.0.1:9"),
            Ok(Some("127.0.0.1:9".parse().expect("valid")))
        );
        assert!(parse_addr("localhost").is_err());
    }
}
