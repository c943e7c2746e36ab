use super::*;
use k8s_openapi::api::core::v1::Node;
use kube::api::{Api, ListParams};
use test_support::assert_contains;

type Handle = tower_test::mock::Handle<Request<Body>, Response<Body>>;

/// A client riding out through a scripted API server, and its handle.
fn ride_out_client(bound: Bound, diagnose: Option<Diagnose>) -> (Client, Handle) {
    let (service, handle) = tower_test::mock::pair::<Request<Body>, Response<Body>>();
    let inner = Client::new(service, "default");
    (
        RideOut::new(inner, bound, diagnose).client("default"),
        handle,
    )
}

const NODES: &str = r#"{"apiVersion": "v1", "kind": "NodeList", "metadata": {}, "items": [{"metadata": {"name": "w1"}}]}"#;

/// The next request's path, answered by `answer`.
async fn next(handle: &mut Handle, answer: Result<&str, &str>) -> String {
    let (request, send) = handle.next_request().await.expect("a request");
    let path = request.uri().path().to_owned();
    match answer {
        Ok(body) => send.send_response(Response::new(Body::from(body.as_bytes().to_vec()))),
        Err(error) => {
            send.send_error(anyhow::format_err!("{error}").context("client error (Connect)"))
        }
    }
    path
}

#[tokio::test(start_paused = true)]
async fn a_request_cut_by_a_restart_is_sent_again_once_readyz_answers() {
    let (client, mut handle) = ride_out_client(Bound::DEFAULT, None);
    let server = tokio::spawn(async move {
        let mut paths = Vec::new();
        paths.push(next(&mut handle, Err("tls handshake eof")).await);
        paths.push(next(&mut handle, Err("Connection refused (os error 111)")).await);
        paths.push(next(&mut handle, Ok("ok")).await);
        paths.push(next(&mut handle, Ok(NODES)).await);
        paths
    });
    let nodes = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .expect("listed after the restart");
    assert_eq!(nodes.items.len(), 1);
    assert_eq!(
        server.await.expect("server"),
        ["/api/v1/nodes", "/readyz", "/readyz", "/api/v1/nodes"]
    );
}

#[tokio::test(start_paused = true)]
async fn another_error_is_returned_at_once() {
    let (client, mut handle) = ride_out_client(Bound::DEFAULT, None);
    let server = tokio::spawn(async move {
        next(&mut handle, Err("invalid peer certificate: UnknownIssuer")).await;
        handle
    });
    let err = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .expect_err("not an outage");
    assert_contains(&chain(&err), "UnknownIssuer");
    let mut handle = server.await.expect("server");
    let more = tokio::time::timeout(Duration::from_secs(5), handle.next_request()).await;
    assert!(
        !matches!(more, Ok(Some(_))),
        "no /readyz probe, no second try"
    );
}

#[tokio::test(start_paused = true)]
async fn an_api_server_away_past_the_bound_fails_with_the_diagnostics() {
    let bound = Bound {
        limit: Duration::from_secs(10),
        every: Duration::from_secs(2),
    };
    let diagnose: Diagnose = Arc::new(|| "kube-apiserver: running, restarted 3 time(s)".to_owned());
    let (client, mut handle) = ride_out_client(bound, Some(diagnose));
    let started = Instant::now();
    let server = tokio::spawn(async move {
        let mut probes = 0;
        while let Some((request, send)) = handle.next_request().await {
            probes += usize::from(request.uri().path() == "/readyz");
            send.send_error(anyhow::format_err!("tls handshake eof"));
        }
        probes
    });
    let err = Api::<Node>::all(client)
        .list(&ListParams::default())
        .await
        .expect_err("bounded");
    let text = format!("{err:#}");
    assert_contains(
        &text,
        "GET /api/v1/nodes: the API server did not answer for 10s",
    );
    assert_contains(&text, "tls handshake eof");
    assert_contains(&text, "restarted 3 time(s)");
    let waited = started.elapsed();
    assert!(
        (Duration::from_secs(10)..Duration::from_secs(12)).contains(&waited),
        "{waited:?}"
    );
    drop(err);
    assert_eq!(
        server.await.expect("server"),
        5,
        "a probe every 2 s for 10 s"
    );
}
