//! The plugin's side of NRI: Configure, Synchronize and CreateContainer; everything else is UNIMPLEMENTED.

use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant};

use prost::Message as _;

use crate::config;
use crate::heal::{self, Healing};
use crate::health::Health;
use crate::plan::{self, Policy, Selection};
use crate::proto::{
    code, ConfigureRequest, ConfigureResponse, CreateContainerRequest, CreateContainerResponse,
    Request, Response, Status, SynchronizeRequest, SynchronizeResponse,
    CREATE_CONTAINER_EVENT_MASK, PLUGIN_SERVICE,
};
use crate::staged;

/// The environment variable of the test-only CreateContainer stall, in milliseconds.
///
/// Only the NRI harness under `tests/nri` sets it, to prove that a plugin
/// stalled past the request timeout is dropped and creation proceeds.
pub const TEST_STALL_ENV: &str = "NVML_MOCK_NRI_TEST_STALL_MS";

/// Share of the runtime's deadline the plugin may spend looking at the staged tree.
const BUDGET_NUMERATOR: u32 = 3;
const BUDGET_DENOMINATOR: u32 = 4;

/// Serves the runtime's calls.
#[derive(Debug)]
pub struct PluginService {
    policy: RwLock<Arc<Policy>>,
    health: Arc<Health>,
    stall: Duration,
    /// What the partial Synchronize requests of this connection listed so far.
    synchronizing: Mutex<SynchronizeRequest>,
    /// The final Synchronize's decision, until the session takes it.
    healing: Mutex<Option<Healing>>,
}

impl PluginService {
    /// A service injecting by `policy`, reporting into `health`, stalling each
    /// CreateContainer by `stall` (zero outside tests).
    pub fn new(policy: Policy, health: Arc<Health>, stall: Duration) -> Self {
        Self {
            policy: RwLock::new(Arc::new(policy)),
            health,
            stall,
            synchronizing: Mutex::default(),
            healing: Mutex::default(),
        }
    }

    /// The containers the last complete Synchronize found unmocked, once: the session stops
    /// them through the runtime after it has answered (see `heal.rs`).
    pub fn take_healing(&self) -> Option<Healing> {
        self.healing
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take()
    }

    /// Answers one ttrpc request envelope.
    pub async fn handle(&self, envelope: &[u8]) -> Response {
        let received = Instant::now();
        let request = match Request::decode(envelope) {
            Ok(request) => request,
            Err(err) => {
                return failure(
                    code::INVALID_ARGUMENT,
                    format!("cannot decode the ttrpc request: {err}"),
                )
            }
        };
        if request.service != PLUGIN_SERVICE {
            return failure(
                code::UNIMPLEMENTED,
                format!("service {} is not served by this plugin", request.service),
            );
        }
        let deadline = match request.timeout_nano {
            nanos if nanos > 0 => Duration::from_nanos(nanos.unsigned_abs()),
            _ => self.health.request_timeout(),
        };
        match request.method.as_str() {
            "Configure" => match ConfigureRequest::decode(request.payload.as_slice()) {
                Ok(req) => self.configure(req),
                Err(err) => failure(
                    code::INVALID_ARGUMENT,
                    format!("cannot decode Configure: {err}"),
                ),
            },
            "Synchronize" => decode_then(&request.payload, |req| self.synchronize(req)),
            "CreateContainer" => match CreateContainerRequest::decode(request.payload.as_slice()) {
                Ok(req) => success(&self.create_container(req, received, deadline).await),
                Err(err) => failure(
                    code::INVALID_ARGUMENT,
                    format!("cannot decode CreateContainer: {err}"),
                ),
            },
            method => failure(
                code::UNIMPLEMENTED,
                format!("method {method} is not implemented by this plugin"),
            ),
        }
    }

    fn configure(&self, request: ConfigureRequest) -> Response {
        match config::parse_drop_in(&request.config) {
            Ok(None) => (),
            Ok(Some(policy)) => {
                tracing::info!(
                    ?policy,
                    "injection options from the runtime's plugin config"
                );
                if let Ok(mut current) = self.policy.write() {
                    *current = Arc::new(policy);
                }
            }
            Err(message) => {
                tracing::error!("{message}");
                return failure(code::INVALID_ARGUMENT, message);
            }
        }
        self.health.set_request_timeout_ms(request.request_timeout);
        tracing::info!(
            runtime = %request.runtime_name,
            version = %request.runtime_version,
            request_timeout = ?self.health.request_timeout(),
            "configured by the runtime; subscribing to CreateContainer"
        );
        success(&ConfigureResponse {
            events: CREATE_CONTAINER_EVENT_MASK,
        })
    }

    fn current_policy(&self) -> Arc<Policy> {
        match self.policy.read() {
            Ok(policy) => policy.clone(),
            Err(poisoned) => poisoned.into_inner().clone(),
        }
    }

    fn synchronize(&self, request: SynchronizeRequest) -> SynchronizeResponse {
        tracing::info!(
            pods = request.pods.len(),
            containers = request.containers.len(),
            more = request.more,
            "synchronize"
        );
        let more = request.more;
        let complete = {
            let mut listed = self
                .synchronizing
                .lock()
                .unwrap_or_else(PoisonError::into_inner);
            listed.pods.extend(request.pods);
            listed.containers.extend(request.containers);
            (!more).then(|| std::mem::take(&mut *listed))
        };
        if let Some(listed) = complete {
            self.health.set_registered(true);
            tracing::info!("registered: new containers get the mock stack");
            let healing = heal::missed(&self.current_policy(), &listed.pods, &listed.containers);
            for missed in &healing.deferred {
                tracing::warn!(container = %missed.who, id = %missed.container_id, limit = heal::MAX_EVICTIONS, "created without the mock stack; over this synchronization's eviction limit, left for the next one");
            }
            if !healing.evict.is_empty() {
                *self.healing.lock().unwrap_or_else(PoisonError::into_inner) = Some(healing);
            }
        }
        SynchronizeResponse { more }
    }

    async fn create_container(
        &self,
        request: CreateContainerRequest,
        received: Instant,
        deadline: Duration,
    ) -> CreateContainerResponse {
        let _in_flight = self.health.begin();
        if !self.stall.is_zero() {
            tracing::warn!(stall = ?self.stall, "{TEST_STALL_ENV} is set: stalling CreateContainer (test only)");
            tokio::time::sleep(self.stall).await;
        }
        let (Some(pod), Some(container)) = (request.pod, request.container) else {
            tracing::warn!("CreateContainer without pod or container: no adjustment");
            return CreateContainerResponse { adjust: None };
        };
        let who = format!("{}/{}/{}", pod.namespace, pod.name, container.name);
        let policy = self.current_policy();
        let wants = match plan::select(&policy, &pod, &container) {
            Selection::Skip(reason) => {
                tracing::info!(container = %who, ?reason, "skipped");
                return CreateContainerResponse { adjust: None };
            }
            Selection::Inject(wants) => wants,
        };
        if wants.request != crate::gpus::GpuRequest::Unspecified {
            tracing::info!(container = %who, request = ?wants.request, "GPU allocation");
        }
        for warning in &wants.warnings {
            tracing::warn!(container = %who, "{warning}");
        }
        let budget =
            (deadline * BUDGET_NUMERATOR / BUDGET_DENOMINATOR).saturating_sub(received.elapsed());
        let work = tokio::task::spawn_blocking(move || {
            let staged = staged::snapshot(&policy, &wants);
            plan::adjust(&policy, &container, staged)
        });
        let plan = match tokio::time::timeout(budget, work).await {
            Ok(Ok(plan)) => plan,
            Ok(Err(err)) => {
                tracing::warn!(container = %who, "planning failed: {err}; no adjustment");
                return CreateContainerResponse { adjust: None };
            }
            Err(_) => {
                tracing::warn!(container = %who, ?budget, "the staged tree did not answer within the budget; no adjustment");
                return CreateContainerResponse { adjust: None };
            }
        };
        for warning in &plan.warnings {
            tracing::warn!(container = %who, "{warning}");
        }
        if let Some(adjustment) = &plan.adjustment {
            let devices = adjustment
                .linux
                .as_ref()
                .map_or(0, |linux| linux.devices.len());
            let elapsed_us = received.elapsed().as_micros();
            tracing::info!(container = %who, env = adjustment.env.len(), devices, elapsed_us, "injected");
        }
        CreateContainerResponse {
            adjust: plan.adjustment,
        }
    }
}

fn decode_then<Req: prost::Message + Default, Rsp: prost::Message>(
    payload: &[u8],
    handler: impl FnOnce(Req) -> Rsp,
) -> Response {
    match Req::decode(payload) {
        Ok(request) => success(&handler(request)),
        Err(err) => failure(
            code::INVALID_ARGUMENT,
            format!("cannot decode the request: {err}"),
        ),
    }
}

fn success(message: &impl prost::Message) -> Response {
    Response {
        status: None,
        payload: message.encode_to_vec(),
    }
}

fn failure(code: i32, message: String) -> Response {
    Response {
        status: Some(Status { code, message }),
        payload: Vec::new(),
    }
}
