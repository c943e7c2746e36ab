//! The kube client's requests ride out an away API server
//! ([`crate::apiserver`]): a request that fails because nothing answered
//! (connection refused, `tls handshake eof`, a connection cut before the
//! response) waits, within the [`Bound`], until `/readyz` answers `ok`, then
//! is sent again. Past the bound it fails with what the API server was doing
//! (the diagnostics hook, for a kind cluster its control plane's containers).
//!
//! It sits in front of an ordinary client as a tower service, so every call
//! (list, get, apply, delete, watch, exec) gets it. Only requests whose body
//! can be replayed are retried (every request kube-rs builds from bytes).

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use anyhow::Context as _;
use http::{Request, Response};
use kube::client::Body;
use kube::Client;
use tokio::time::Instant;

use crate::apiserver::{chain, classify, Bound, Failure, Progress};

/// What the API server's host shows when it stays away (blocking, best effort).
pub type Diagnose = Arc<dyn Fn() -> String + Send + Sync>;

/// A tower service sending through `inner`, riding out an away API server.
#[derive(Clone)]
pub struct RideOut {
    inner: Client,
    bound: Bound,
    diagnose: Option<Diagnose>,
    progress: Arc<Mutex<Progress>>,
}

impl RideOut {
    /// Requests through `inner`, waited out within `bound`.
    pub fn new(inner: Client, bound: Bound, diagnose: Option<Diagnose>) -> RideOut {
        RideOut {
            inner,
            bound,
            diagnose,
            progress: Arc::new(Mutex::new(Progress::default())),
        }
    }

    /// A client whose every request goes through this service.
    pub fn client(self, default_namespace: &str) -> Client {
        Client::new(self, default_namespace)
    }

    async fn send(self, request: Request<Body>) -> Result<Response<Body>, kube::Error> {
        let spare = replay(&request);
        let err = match self.inner.send(request).await {
            Ok(response) => return Ok(response),
            Err(err) => err,
        };
        let Some(spare) = spare.filter(|_| is_away(&err)) else {
            return Err(err);
        };
        let since = Instant::now();
        let mut last = chain(&err);
        let what = format!("{} {}", spare.method(), spare.uri().path());
        loop {
            self.wait_ready(&what, since, &last).await?;
            let Some(again) = replay(&spare) else {
                return Err(err);
            };
            match self.inner.send(again).await {
                Ok(response) => return Ok(response),
                Err(err) if is_away(&err) => last = chain(&err),
                Err(err) => return Err(err),
            }
        }
    }

    /// Polls `/readyz` every `bound.every` until it answers, or fails once
    /// the bound (from `since`) is spent.
    async fn wait_ready(&self, what: &str, since: Instant, last: &str) -> Result<(), kube::Error> {
        loop {
            let Some(pause) = self.bound.next_pause(since.elapsed()) else {
                return Err(self.gave_up(what, last));
            };
            if let Ok(mut progress) = self.progress.lock() {
                progress.say(what, last, since.elapsed(), self.bound);
            }
            tokio::time::sleep(pause).await;
            if self.ready().await {
                return Ok(());
            }
        }
    }

    /// Whether `/readyz` answers `ok` within a few seconds.
    async fn ready(&self) -> bool {
        let Ok(request) = Request::get("/readyz").body(Vec::new()) else {
            return false;
        };
        let probe = self.inner.request_text(request);
        matches!(
            tokio::time::timeout(Duration::from_secs(5), probe).await,
            Ok(Ok(text)) if text.trim() == "ok"
        )
    }

    fn gave_up(&self, what: &str, last: &str) -> kube::Error {
        let diagnostics = self
            .diagnose
            .as_ref()
            .map(|it| format!("\n{}", it()))
            .unwrap_or_default();
        kube::Error::Service(
            format!(
                "{what}: the API server did not answer for {}s (last: {last}){diagnostics}",
                self.bound.limit.as_secs()
            )
            .into(),
        )
    }
}

/// A kube client for a kind cluster: as [`super::client`], and an API server away
/// past the bound is explained by its control plane's containers
/// ([`crate::apiserver::control_plane_state`]).
pub async fn kind_client(cluster: &crate::names::KindCluster) -> anyhow::Result<Client> {
    let node = cluster.control_plane();
    let diagnose: Diagnose = std::sync::Arc::new(move || {
        let Ok(sh) = xshell::Shell::new() else {
            return format!("(no shell to inspect {node})");
        };
        let runner = crate::runner::ShellRunner::new(&sh, "kind".into(), "helm".into());
        crate::apiserver::control_plane_state(&runner, &node)
    });
    client_with(&cluster.context(), Some(diagnose)).await
}

pub(super) async fn client_with(
    context: &str,
    diagnose: Option<Diagnose>,
) -> anyhow::Result<Client> {
    let options = kube::config::KubeConfigOptions {
        context: Some(context.to_owned()),
        ..Default::default()
    };
    let config = kube::Config::from_kubeconfig(&options).await.with_context(|| {
        format!("no usable kube context `{context}` in the kubeconfig: for kind run `kind export kubeconfig --name <cluster>`")
    })?;
    let namespace = config.default_namespace.clone();
    let inner = Client::try_from(config)
        .with_context(|| format!("cannot build a client for context `{context}`"))?;
    let bound = crate::apiserver::Bound::DEFAULT;
    Ok(RideOut::new(inner, bound, diagnose).client(&namespace))
}

/// Whether `err` is the API server being away.
fn is_away(err: &kube::Error) -> bool {
    classify(&chain(err)) == Failure::Unreachable
}

/// A copy of `request` to send again, when its body can be replayed.
fn replay(request: &Request<Body>) -> Option<Request<Body>> {
    let body = request.body().try_clone()?;
    let mut copy = Request::builder()
        .method(request.method().clone())
        .uri(request.uri().clone())
        .version(request.version())
        .body(body)
        .ok()?;
    *copy.headers_mut() = request.headers().clone();
    *copy.extensions_mut() = request.extensions().clone();
    Some(copy)
}

impl tower_service::Service<Request<Body>> for RideOut {
    type Response = Response<Body>;
    type Error = kube::Error;
    type Future = Pin<Box<dyn Future<Output = Result<Response<Body>, kube::Error>> + Send>>;

    fn poll_ready(&mut self, _: &mut Context<'_>) -> Poll<Result<(), Self::Error>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Request<Body>) -> Self::Future {
        Box::pin(self.clone().send(request))
    }
}

#[cfg(test)]
mod tests;
