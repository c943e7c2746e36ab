//! One session with the runtime over the multiplexed trunk socket.
//!
//! The reader task demultiplexes frames: requests on the plugin-service
//! connection are each answered by their own task (so Configure is served
//! while RegisterPlugin is still waiting for its reply), and the reply to
//! RegisterPlugin arrives on the runtime-service connection.
//! A single writer task owns the write half, so frames never interleave, and
//! splits every message into frames of at most 4096 bytes.
//! A session only ends with an error: the runtime closing the trunk is
//! [`SessionError::Closed`].

use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::Arc;

use prost::Message as _;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::sync::mpsc;

use crate::proto::{
    code, ContainerEviction, RegisterPluginRequest, Request, Response, UpdateContainersRequest,
    RUNTIME_SERVICE,
};
use crate::service::PluginService;
use crate::wire::{
    self, MessageDecoder, FRAME_HEADER_LEN, MESSAGE_REQUEST, MESSAGE_RESPONSE, PLUGIN_SERVICE_CONN,
    RUNTIME_SERVICE_CONN,
};
use crate::{heal, stop};

/// The NRI version the plugin announces at registration (informational).
pub const NRI_VERSION: &str = "v0.12.2";

/// The stream id of the plugin's first call, RegisterPlugin.
const REGISTER_STREAM_ID: u32 = 1;

/// The stream id of the plugin's next UpdateContainers call (a ttrpc client's ids are odd and
/// increasing).
static NEXT_STREAM_ID: AtomicU32 = AtomicU32::new(REGISTER_STREAM_ID + 2);

/// How the plugin registers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Identity {
    /// Plugin name (`nvml-mock`).
    pub name: String,
    /// Two-digit index (`10`).
    pub index: String,
}

/// Why a session ended.
#[derive(Debug, thiserror::Error)]
pub enum SessionError {
    /// The runtime closed the connection.
    #[error("the runtime closed the NRI connection")]
    Closed,
    /// Reading or writing the trunk failed.
    #[error("NRI connection failed")]
    Io(#[source] std::io::Error),
    /// The runtime broke the wire protocol.
    #[error("NRI protocol violation")]
    Protocol(#[source] wire::Error),
    /// The runtime refused the registration.
    #[error("the runtime rejected the registration as {name}: {message} (code {code})")]
    Rejected {
        /// `NN-name`.
        name: String,
        /// The status code.
        code: i32,
        /// The runtime's message.
        message: String,
    },
}

/// Registers and serves until the connection ends.
pub async fn run<T>(trunk: T, identity: &Identity, service: Arc<PluginService>) -> SessionError
where
    T: AsyncRead + AsyncWrite + Send + 'static,
{
    let (mut reader, writer) = tokio::io::split(trunk);
    let (outgoing, queue) = mpsc::channel::<Vec<u8>>(256);
    let writer_task = tokio::spawn(write_frames(writer, queue));
    let end = serve(&mut reader, identity, service, outgoing).await;
    writer_task.abort();
    end
}

async fn serve<R>(
    reader: &mut R,
    identity: &Identity,
    service: Arc<PluginService>,
    outgoing: mpsc::Sender<Vec<u8>>,
) -> SessionError
where
    R: AsyncRead + Unpin,
{
    if outgoing.send(registration(identity)).await.is_err() {
        return SessionError::Closed;
    }
    tracing::info!(plugin = %format!("{}-{}", identity.index, identity.name), "registering with the runtime");

    let mut plugin_conn = MessageDecoder::default();
    let mut runtime_conn = MessageDecoder::default();
    loop {
        let (conn, payload) = match read_frame(reader).await {
            Ok(frame) => frame,
            Err(end) => return end,
        };
        let decoder = match conn {
            PLUGIN_SERVICE_CONN => &mut plugin_conn,
            RUNTIME_SERVICE_CONN => &mut runtime_conn,
            other => {
                tracing::debug!(
                    conn = other,
                    "discarding a frame for an unknown mux connection"
                );
                continue;
            }
        };
        let messages = match decoder.push(&payload) {
            Ok(messages) => messages,
            Err(err) => return SessionError::Protocol(err),
        };
        for message in messages {
            match (conn, message.kind) {
                (PLUGIN_SERVICE_CONN, MESSAGE_REQUEST) => {
                    answer(service.clone(), outgoing.clone(), message);
                }
                (RUNTIME_SERVICE_CONN, MESSAGE_RESPONSE)
                    if message.stream_id == REGISTER_STREAM_ID =>
                {
                    if let Some(end) = registration_reply(identity, &message) {
                        return end;
                    }
                }
                (RUNTIME_SERVICE_CONN, MESSAGE_RESPONSE) => update_containers_reply(&message),
                (conn, kind) => tracing::debug!(
                    conn,
                    kind,
                    stream = message.stream_id,
                    "ignoring an unexpected ttrpc message"
                ),
            }
        }
    }
}

/// The `RegisterPlugin` request, framed for the runtime service connection.
fn registration(identity: &Identity) -> Vec<u8> {
    let register = Request {
        service: RUNTIME_SERVICE.to_owned(),
        method: "RegisterPlugin".to_owned(),
        payload: RegisterPluginRequest {
            plugin_name: identity.name.clone(),
            plugin_idx: identity.index.clone(),
            nri_version: NRI_VERSION.to_owned(),
        }
        .encode_to_vec(),
        timeout_nano: 0,
    };
    let message = wire::encode_message(
        REGISTER_STREAM_ID,
        MESSAGE_REQUEST,
        &register.encode_to_vec(),
    );
    wire::encode_frames(RUNTIME_SERVICE_CONN, &message)
}

/// One mux frame: its connection and payload; how the session ends when there is none.
async fn read_frame<R>(reader: &mut R) -> Result<(u32, Vec<u8>), SessionError>
where
    R: AsyncRead + Unpin,
{
    let mut header = [0u8; FRAME_HEADER_LEN];
    reader.read_exact(&mut header).await.map_err(io_end)?;
    let header = wire::decode_frame_header(header).map_err(SessionError::Protocol)?;
    let mut payload = vec![0u8; header.length];
    reader.read_exact(&mut payload).await.map_err(io_end)?;
    Ok((header.conn, payload))
}

/// Answers one plugin-service request in its own task; after a complete Synchronize, stops the
/// containers it found unmocked.
fn answer(service: Arc<PluginService>, outgoing: mpsc::Sender<Vec<u8>>, message: wire::Message) {
    tokio::spawn(async move {
        let response = service.handle(&message.data).await;
        let reply = wire::encode_message(
            message.stream_id,
            MESSAGE_RESPONSE,
            &response.encode_to_vec(),
        );
        // A closed queue means the session is over; the reader reports why.
        let _ = outgoing
            .send(wire::encode_frames(PLUGIN_SERVICE_CONN, &reply))
            .await;
        if let Some(healing) = service.take_healing() {
            evict(outgoing, healing).await;
        }
    });
}

/// Asks the runtime to stop each missed container (`UpdateContainers` with one eviction), paced
/// by [`heal::EVICTION_INTERVAL`], each logged with the pod, the container and why.
async fn evict(outgoing: mpsc::Sender<Vec<u8>>, healing: heal::Healing) {
    tokio::time::sleep(heal::FIRST_EVICTION_DELAY).await;
    for missed in healing.evict {
        let container_id = missed.container_id.clone();
        tracing::warn!(
            container = %missed.who,
            id = %missed.container_id,
            "created while the plugin was not registered, so it runs without the mock stack: asking the runtime to stop it, so that kubelet creates it again through the plugin"
        );
        let request = Request {
            service: RUNTIME_SERVICE.to_owned(),
            method: "UpdateContainers".to_owned(),
            payload: UpdateContainersRequest {
                evict: vec![ContainerEviction {
                    container_id,
                    reason: heal::EVICTION_REASON.to_owned(),
                }],
            }
            .encode_to_vec(),
            timeout_nano: 0,
        };
        let stream = NEXT_STREAM_ID.fetch_add(2, Ordering::Relaxed);
        let message = wire::encode_message(stream, MESSAGE_REQUEST, &request.encode_to_vec());
        if outgoing
            .send(wire::encode_frames(RUNTIME_SERVICE_CONN, &message))
            .await
            .is_err()
        {
            return;
        }
        let who = missed.who.clone();
        tokio::spawn(async move {
            tokio::time::sleep(heal::EVICTION_GRACE).await;
            match tokio::task::spawn_blocking(move || stop::stop_process(&missed)).await {
                Ok(stop::Stopped::AlreadyGone) => {
                    tracing::info!(container = %who, "stopped by the runtime");
                }
                Ok(stop::Stopped::Killed) => tracing::warn!(
                    container = %who,
                    "the runtime ignored the eviction: sent SIGKILL to the container's process, as an eviction would"
                ),
                Ok(stop::Stopped::LeftAlone(why)) => tracing::error!(
                    container = %who,
                    "still running without the mock stack, left alone: {why}"
                ),
                Err(err) => {
                    tracing::error!(container = %who, "stopping the container failed: {err}")
                }
            }
        });
        tokio::time::sleep(heal::EVICTION_INTERVAL).await;
    }
}

/// The runtime's reply to `RegisterPlugin`: the session's end when it is a rejection.
fn registration_reply(identity: &Identity, message: &wire::Message) -> Option<SessionError> {
    let status = Response::decode(message.data.as_slice()).map(|response| response.status);
    match status {
        Ok(None) => tracing::info!("registration accepted"),
        Ok(Some(status)) if status.code == code::OK => tracing::info!("registration accepted"),
        Ok(Some(status)) => {
            return Some(SessionError::Rejected {
                name: format!("{}-{}", identity.index, identity.name),
                code: status.code,
                message: status.message,
            })
        }
        Err(err) => tracing::warn!("cannot decode the RegisterPlugin reply: {err}"),
    }
    None
}

/// The runtime's reply to an `UpdateContainers` eviction: logged, the session goes on.
fn update_containers_reply(message: &wire::Message) {
    match Response::decode(message.data.as_slice()).map(|response| response.status) {
        Ok(Some(status)) if status.code != code::OK => tracing::warn!(
            stream = message.stream_id,
            code = status.code,
            "the runtime refused an eviction: {}",
            status.message
        ),
        Ok(_) => tracing::info!(
            stream = message.stream_id,
            "eviction accepted by the runtime"
        ),
        Err(err) => tracing::warn!("cannot decode an UpdateContainers reply: {err}"),
    }
}

fn io_end(err: std::io::Error) -> SessionError {
    match err.kind() {
        std::io::ErrorKind::UnexpectedEof
        | std::io::ErrorKind::ConnectionReset
        | std::io::ErrorKind::BrokenPipe => SessionError::Closed,
        _ => SessionError::Io(err),
    }
}

async fn write_frames<W>(mut writer: W, mut queue: mpsc::Receiver<Vec<u8>>)
where
    W: AsyncWrite + Unpin,
{
    while let Some(frames) = queue.recv().await {
        if let Err(err) = writer.write_all(&frames).await {
            tracing::debug!("writing to the runtime failed: {err}");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use std::path::PathBuf;
    use std::time::Duration;

    use tokio::io::{AsyncReadExt, AsyncWriteExt, DuplexStream};

    use super::*;
    use crate::health::Health;
    use crate::plan::Policy;
    use crate::proto::{
        ConfigureRequest, ConfigureResponse, Container, CreateContainerRequest,
        CreateContainerResponse, PodSandbox, SynchronizeRequest, SynchronizeResponse,
        PLUGIN_SERVICE,
    };
    use crate::wire::{MessageDecoder, MAX_FRAME_PAYLOAD};

    /// Reads frames from the plugin until one ttrpc message on `conn` is complete,
    /// checking that no frame exceeds 4096 bytes.
    async fn next_message(
        runtime: &mut DuplexStream,
        decoders: &mut [MessageDecoder; 2],
        conn: u32,
    ) -> wire::Message {
        loop {
            let mut header = [0u8; FRAME_HEADER_LEN];
            runtime
                .read_exact(&mut header)
                .await
                .expect("a frame header");
            let header = wire::decode_frame_header(header).expect("a valid header");
            assert!(
                header.length <= MAX_FRAME_PAYLOAD,
                "frame of {} bytes",
                header.length
            );
            let mut payload = vec![0u8; header.length];
            runtime
                .read_exact(&mut payload)
                .await
                .expect("a frame payload");
            let decoder = &mut decoders[(header.conn - 1) as usize];
            let mut messages = decoder.push(&payload).expect("valid ttrpc");
            if header.conn == conn && !messages.is_empty() {
                return messages.remove(0);
            }
        }
    }

    /// Runs a session as plugin `10-nvml-mock` over an in-memory pipe of `buffer` bytes;
    /// returns the runtime's end and the session's task.
    fn start_session(
        policy: Policy,
        health: Arc<Health>,
        buffer: usize,
    ) -> (DuplexStream, tokio::task::JoinHandle<SessionError>) {
        let service = Arc::new(PluginService::new(policy, health, Duration::ZERO));
        let (plugin_end, runtime) = tokio::io::duplex(buffer);
        let identity = Identity {
            name: "nvml-mock".to_owned(),
            index: "10".to_owned(),
        };
        let session = tokio::spawn(async move { run(plugin_end, &identity, service).await });
        (runtime, session)
    }

    async fn call(runtime: &mut DuplexStream, stream_id: u32, method: &str, payload: Vec<u8>) {
        let request = Request {
            service: PLUGIN_SERVICE.to_owned(),
            method: method.to_owned(),
            payload,
            timeout_nano: 2_000_000_000,
        };
        let message = wire::encode_message(stream_id, MESSAGE_REQUEST, &request.encode_to_vec());
        // Send it as one big frame, as Go may.
        let mut frame = PLUGIN_SERVICE_CONN.to_be_bytes().to_vec();
        frame.extend_from_slice(&(message.len() as u32).to_be_bytes());
        frame.extend_from_slice(&message);
        runtime.write_all(&frame).await.expect("write");
    }

    #[tokio::test]
    async fn a_2048_device_adjustment_goes_out_in_frames_of_at_most_4096_bytes() {
        // 2048 staged "channels": symlinks to /dev/null, a character device anyone can stat.
        let tree = tempfile::tempdir().expect("temp dir");
        let channels = node_layout::paths::Layout::new(tree.path().to_path_buf()).channel_dir();
        std::fs::create_dir_all(&channels).expect("channel dir");
        for index in 0..2048 {
            std::os::unix::fs::symlink("/dev/null", channels.join(format!("channel{index}")))
                .expect("symlink");
        }
        let policy = Policy {
            overlay_host: tree.path().to_path_buf(),
            overlay_mount: PathBuf::from("/opt/nvml-mock"),
            node_name: String::new(),
            opt_out_annotation: "inject".to_owned(),
            device_annotation: "devices".to_owned(),
            imex_channel_annotation: "channels".to_owned(),
            excluded_namespaces: Policy::parse_excluded_namespaces(""),
        };
        let health = Arc::new(Health::default());
        let (mut runtime, session) = start_session(policy, health, 1 << 20);
        let mut decoders = [MessageDecoder::default(), MessageDecoder::default()];

        // RegisterPlugin comes first; Configure is answered before its reply.
        let register = next_message(&mut runtime, &mut decoders, RUNTIME_SERVICE_CONN).await;
        let envelope = Request::decode(register.data.as_slice()).expect("a request");
        assert_eq!(
            (envelope.service.as_str(), envelope.method.as_str()),
            (RUNTIME_SERVICE, "RegisterPlugin")
        );
        let registration =
            RegisterPluginRequest::decode(envelope.payload.as_slice()).expect("a registration");
        assert_eq!(
            (
                registration.plugin_name.as_str(),
                registration.plugin_idx.as_str()
            ),
            ("nvml-mock", "10")
        );

        call(
            &mut runtime,
            1,
            "Configure",
            ConfigureRequest::default().encode_to_vec(),
        )
        .await;
        let reply = next_message(&mut runtime, &mut decoders, PLUGIN_SERVICE_CONN).await;
        let response = Response::decode(reply.data.as_slice()).expect("a response");
        assert_eq!(response.status, None);
        assert_eq!(
            ConfigureResponse::decode(response.payload.as_slice())
                .expect("configure")
                .events,
            0x8
        );

        call(&mut runtime, 3, "StateChange", Vec::new()).await;
        let reply = next_message(&mut runtime, &mut decoders, PLUGIN_SERVICE_CONN).await;
        let status = Response::decode(reply.data.as_slice())
            .expect("a response")
            .status;
        assert_eq!(status.map(|status| status.code), Some(code::UNIMPLEMENTED));

        let pod = PodSandbox {
            namespace: "demo".to_owned(),
            annotations: [("channels".to_owned(), "true".to_owned())]
                .into_iter()
                .collect(),
            ..PodSandbox::default()
        };
        let create = CreateContainerRequest {
            pod: Some(pod),
            container: Some(Container::default()),
        };
        call(&mut runtime, 5, "CreateContainer", create.encode_to_vec()).await;
        let reply = next_message(&mut runtime, &mut decoders, PLUGIN_SERVICE_CONN).await;
        assert_eq!(reply.stream_id, 5);
        assert!(
            reply.data.len() > 100_000,
            "reply of {} bytes",
            reply.data.len()
        );
        let response = Response::decode(reply.data.as_slice()).expect("a response");
        let adjust = CreateContainerResponse::decode(response.payload.as_slice())
            .expect("a create response")
            .adjust
            .expect("an adjustment");
        let devices = adjust.linux.expect("devices").devices;
        assert_eq!(devices.len(), 2048);
        assert_eq!(
            devices[2047].path,
            "/dev/nvidia-caps-imex-channels/channel2047"
        );
        assert_eq!((devices[2047].major, devices[2047].minor), (1, 3));

        drop(runtime);
        let end = tokio::time::timeout(Duration::from_secs(5), session)
            .await
            .expect("session ends")
            .expect("join");
        assert!(matches!(end, SessionError::Closed), "{end:?}");
    }

    /// A Synchronize split in two lists one container created while the plugin was away and one
    /// injected container; after the final reply the plugin evicts exactly the first.
    #[tokio::test]
    async fn a_container_created_while_away_is_evicted_after_synchronize() {
        let policy = Policy {
            overlay_host: PathBuf::from("/var/lib/nvml-mock"),
            overlay_mount: PathBuf::from("/opt/nvml-mock"),
            node_name: String::new(),
            opt_out_annotation: "inject".to_owned(),
            device_annotation: "devices".to_owned(),
            imex_channel_annotation: "channels".to_owned(),
            excluded_namespaces: Policy::parse_excluded_namespaces("nvml-mock"),
        };
        let health = Arc::new(Health::default());
        let (mut runtime, _session) = start_session(policy, health.clone(), 1 << 16);
        let mut decoders = [MessageDecoder::default(), MessageDecoder::default()];
        next_message(&mut runtime, &mut decoders, RUNTIME_SERVICE_CONN).await;

        let pod = |id: &str, namespace: &str| PodSandbox {
            id: id.to_owned(),
            name: id.to_owned(),
            namespace: namespace.to_owned(),
            ..PodSandbox::default()
        };
        let container = |id: &str, pod: &str, mounted: bool| Container {
            id: id.to_owned(),
            pod_sandbox_id: pod.to_owned(),
            name: "main".to_owned(),
            state: crate::proto::container_state::RUNNING,
            mounts: mounted
                .then(|| crate::proto::Mount {
                    destination: "/opt/nvml-mock".to_owned(),
                    ..crate::proto::Mount::default()
                })
                .into_iter()
                .collect(),
            ..Container::default()
        };
        let first = SynchronizeRequest {
            pods: vec![pod("workload", "demo"), pod("plugin", "nvml-mock")],
            containers: vec![container("unmocked", "workload", false)],
            more: true,
        };
        call(&mut runtime, 1, "Synchronize", first.encode_to_vec()).await;
        let reply = next_message(&mut runtime, &mut decoders, PLUGIN_SERVICE_CONN).await;
        let response = Response::decode(reply.data.as_slice()).expect("a response");
        let partial = SynchronizeResponse::decode(response.payload.as_slice()).expect("sync");
        assert!(partial.more, "a partial request is answered with more");
        assert!(
            health.assess(std::time::Instant::now()).ready.is_err(),
            "not registered before the last part"
        );

        let last = SynchronizeRequest {
            pods: Vec::new(),
            containers: vec![
                container("injected", "workload", true),
                container("own", "plugin", false),
            ],
            more: false,
        };
        call(&mut runtime, 3, "Synchronize", last.encode_to_vec()).await;
        next_message(&mut runtime, &mut decoders, PLUGIN_SERVICE_CONN).await;
        assert!(health.assess(std::time::Instant::now()).ready.is_ok());

        let update = tokio::time::timeout(
            Duration::from_secs(5),
            next_message(&mut runtime, &mut decoders, RUNTIME_SERVICE_CONN),
        )
        .await
        .expect("an UpdateContainers call");
        let envelope = Request::decode(update.data.as_slice()).expect("a request");
        assert_eq!(
            (envelope.service.as_str(), envelope.method.as_str()),
            (RUNTIME_SERVICE, "UpdateContainers")
        );
        assert_eq!(update.stream_id % 2, 1, "client stream ids are odd");
        let evictions = UpdateContainersRequest::decode(envelope.payload.as_slice())
            .expect("an update request")
            .evict;
        assert_eq!(evictions.len(), 1);
        assert_eq!(evictions[0].container_id, "unmocked");
        assert_eq!(evictions[0].reason, heal::EVICTION_REASON);
        let another = tokio::time::timeout(
            heal::FIRST_EVICTION_DELAY + 3 * heal::EVICTION_INTERVAL,
            next_message(&mut runtime, &mut decoders, RUNTIME_SERVICE_CONN),
        )
        .await;
        assert!(another.is_err(), "only the unmocked container is evicted");
    }

    #[tokio::test]
    async fn a_rejected_registration_ends_the_session() {
        let health = Arc::new(Health::default());
        let policy = Policy {
            overlay_host: PathBuf::from("/nonexistent"),
            overlay_mount: PathBuf::from("/opt/nvml-mock"),
            node_name: String::new(),
            opt_out_annotation: String::new(),
            device_annotation: String::new(),
            imex_channel_annotation: String::new(),
            excluded_namespaces: Policy::parse_excluded_namespaces(""),
        };
        let (mut runtime, session) = start_session(policy, health, 1 << 16);
        let mut decoders = [MessageDecoder::default(), MessageDecoder::default()];
        let register = next_message(&mut runtime, &mut decoders, RUNTIME_SERVICE_CONN).await;

        let rejection = Response {
            status: Some(crate::proto::Status {
                code: 3,
                message: "invalid plugin index".to_owned(),
            }),
            payload: Vec::new(),
        };
        let message = wire::encode_message(
            register.stream_id,
            MESSAGE_RESPONSE,
            &rejection.encode_to_vec(),
        );
        runtime
            .write_all(&wire::encode_frames(RUNTIME_SERVICE_CONN, &message))
            .await
            .expect("write");
        let end = tokio::time::timeout(Duration::from_secs(5), session)
            .await
            .expect("session ends")
            .expect("join");
        assert_eq!(
            end.to_string(),
            "the runtime rejected the registration as 10-nvml-mock: invalid plugin index (code 3)"
        );
    }
}
