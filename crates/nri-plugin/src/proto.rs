//! The wire messages: ttrpc's envelope and the NRI `v1alpha1` messages the plugin uses.
//!
//! Hand-declared with `prost` derives and the field numbers of the NRI and
//! ttrpc protobuf definitions, so the build needs no `protoc`.
//! Only the fields the plugin reads or writes are declared; decoders skip the
//! rest, and fields an older runtime does not know are dropped by it.

use std::collections::BTreeMap;

/// The NRI service the plugin serves (the runtime is the client).
pub const PLUGIN_SERVICE: &str = "nri.pkg.api.v1alpha1.Plugin";

/// The NRI service the runtime serves (the plugin is the client).
pub const RUNTIME_SERVICE: &str = "nri.pkg.api.v1alpha1.Runtime";

/// The `CREATE_CONTAINER` event's bit in `ConfigureResponse.events`.
pub const CREATE_CONTAINER_EVENT_MASK: i32 = 1 << (4 - 1);

/// gRPC status codes the plugin sends.
pub mod code {
    /// Success.
    pub const OK: i32 = 0;
    /// The request payload could not be decoded.
    pub const INVALID_ARGUMENT: i32 = 3;
    /// The method or service is not served by this plugin.
    pub const UNIMPLEMENTED: i32 = 12;
}

/// ttrpc's request envelope.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Request {
    /// Fully qualified service name.
    #[prost(string, tag = "1")]
    pub service: String,
    /// Method name.
    #[prost(string, tag = "2")]
    pub method: String,
    /// The serialized method request.
    #[prost(bytes = "vec", tag = "3")]
    pub payload: Vec<u8>,
    /// The caller's deadline, relative, in nanoseconds (0: none).
    #[prost(int64, tag = "4")]
    pub timeout_nano: i64,
}

/// ttrpc's response envelope.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Response {
    /// The call's status (absent or code 0: success).
    #[prost(message, optional, tag = "1")]
    pub status: Option<Status>,
    /// The serialized method response.
    #[prost(bytes = "vec", tag = "2")]
    pub payload: Vec<u8>,
}

/// `google.rpc.Status`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Status {
    /// A gRPC status code (see [`code`]).
    #[prost(int32, tag = "1")]
    pub code: i32,
    /// A human-readable message.
    #[prost(string, tag = "2")]
    pub message: String,
}

/// `RegisterPluginRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct RegisterPluginRequest {
    /// The plugin's name (`nvml-mock`).
    #[prost(string, tag = "1")]
    pub plugin_name: String,
    /// The plugin's two-digit index (`10`).
    #[prost(string, tag = "2")]
    pub plugin_idx: String,
    /// The NRI version the plugin speaks (v0.12+, informational).
    #[prost(string, tag = "3")]
    pub nri_version: String,
}

/// `ConfigureRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigureRequest {
    /// The plugin's drop-in config (empty for external plugins).
    #[prost(string, tag = "1")]
    pub config: String,
    /// The runtime's name (`containerd`).
    #[prost(string, tag = "2")]
    pub runtime_name: String,
    /// The runtime's version.
    #[prost(string, tag = "3")]
    pub runtime_version: String,
    /// Registration timeout in milliseconds (0 before NRI v0.7).
    #[prost(int64, tag = "4")]
    pub registration_timeout: i64,
    /// Request timeout in milliseconds (0 before NRI v0.7).
    #[prost(int64, tag = "5")]
    pub request_timeout: i64,
}

/// `ConfigureResponse`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ConfigureResponse {
    /// The events the plugin subscribes to (bit `1 << (event - 1)`).
    #[prost(int32, tag = "2")]
    pub events: i32,
}

/// `SynchronizeRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct SynchronizeRequest {
    /// Existing pods.
    #[prost(message, repeated, tag = "1")]
    pub pods: Vec<PodSandbox>,
    /// Existing containers.
    #[prost(message, repeated, tag = "2")]
    pub containers: Vec<Container>,
    /// More partial requests follow (v0.7+).
    #[prost(bool, tag = "3")]
    pub more: bool,
}

/// `SynchronizeResponse` (the plugin never sends updates, field 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct SynchronizeResponse {
    /// Echoes the request's `more`.
    #[prost(bool, tag = "2")]
    pub more: bool,
}

/// `UpdateContainersRequest`, the plugin's unsolicited call (the plugin never sends updates,
/// field 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct UpdateContainersRequest {
    /// Containers the runtime is to stop.
    #[prost(message, repeated, tag = "2")]
    pub evict: Vec<ContainerEviction>,
}

/// `ContainerEviction`: the runtime stops the container (containerd: StopContainer, timeout 0).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerEviction {
    /// The container's id.
    #[prost(string, tag = "1")]
    pub container_id: String,
    /// Why, for the runtime's log.
    #[prost(string, tag = "2")]
    pub reason: String,
}

/// `ContainerState` values.
pub mod container_state {
    /// Created, not started.
    pub const CREATED: i32 = 1;
    /// Running.
    pub const RUNNING: i32 = 3;
}

/// `CreateContainerRequest`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerRequest {
    /// The container's pod.
    #[prost(message, optional, tag = "1")]
    pub pod: Option<PodSandbox>,
    /// The container as the runtime would create it.
    #[prost(message, optional, tag = "2")]
    pub container: Option<Container>,
}

/// `CreateContainerResponse` (the plugin never sends updates or evictions).
#[derive(Clone, PartialEq, prost::Message)]
pub struct CreateContainerResponse {
    /// The plugin's adjustment (absent: none).
    #[prost(message, optional, tag = "1")]
    pub adjust: Option<ContainerAdjustment>,
}

/// `PodSandbox`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct PodSandbox {
    /// Sandbox id.
    #[prost(string, tag = "1")]
    pub id: String,
    /// Pod name.
    #[prost(string, tag = "2")]
    pub name: String,
    /// Pod uid.
    #[prost(string, tag = "3")]
    pub uid: String,
    /// Pod namespace.
    #[prost(string, tag = "4")]
    pub namespace: String,
    /// Pod annotations.
    #[prost(btree_map = "string, string", tag = "6")]
    pub annotations: BTreeMap<String, String>,
}

/// `Container`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Container {
    /// Container id.
    #[prost(string, tag = "1")]
    pub id: String,
    /// The pod's sandbox id.
    #[prost(string, tag = "2")]
    pub pod_sandbox_id: String,
    /// Container name.
    #[prost(string, tag = "3")]
    pub name: String,
    /// `ContainerState` (see [`container_state`]); filled in Synchronize.
    #[prost(int32, tag = "4")]
    pub state: i32,
    /// Container annotations (CDI device requests arrive as `cdi.k8s.io/*` entries).
    #[prost(btree_map = "string, string", tag = "6")]
    pub annotations: BTreeMap<String, String>,
    /// Environment, `KEY=VALUE` each.
    #[prost(string, repeated, tag = "8")]
    pub env: Vec<String>,
    /// Mounts.
    #[prost(message, repeated, tag = "9")]
    pub mounts: Vec<Mount>,
    /// Linux-specific settings.
    #[prost(message, optional, tag = "11")]
    pub linux: Option<LinuxContainer>,
    /// The container's init process, as the runtime sees it (0: none); filled in Synchronize.
    #[prost(uint32, tag = "12")]
    pub pid: u32,
    /// CDI devices (v0.10+).
    #[prost(message, repeated, tag = "20")]
    pub cdi_devices: Vec<CdiDevice>,
}

/// `LinuxContainer`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainer {
    /// Device nodes.
    #[prost(message, repeated, tag = "2")]
    pub devices: Vec<LinuxDevice>,
}

/// `CDIDevice`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct CdiDevice {
    /// Fully qualified CDI name.
    #[prost(string, tag = "1")]
    pub name: String,
}

/// `Mount`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Mount {
    /// Path inside the container.
    #[prost(string, tag = "1")]
    pub destination: String,
    /// Mount type (`bind`).
    #[prost(string, tag = "2")]
    pub r#type: String,
    /// Host path.
    #[prost(string, tag = "3")]
    pub source: String,
    /// Mount options.
    #[prost(string, repeated, tag = "4")]
    pub options: Vec<String>,
}

/// `KeyValue`: one environment entry of an adjustment.
#[derive(Clone, PartialEq, prost::Message)]
pub struct KeyValue {
    /// Variable name.
    #[prost(string, tag = "1")]
    pub key: String,
    /// Variable value.
    #[prost(string, tag = "2")]
    pub value: String,
}

/// `LinuxDevice`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxDevice {
    /// Path inside the container.
    #[prost(string, tag = "1")]
    pub path: String,
    /// `c` for a character device.
    #[prost(string, tag = "2")]
    pub r#type: String,
    /// Major number.
    #[prost(int64, tag = "3")]
    pub major: i64,
    /// Minor number.
    #[prost(int64, tag = "4")]
    pub minor: i64,
    /// Permission bits.
    #[prost(message, optional, tag = "5")]
    pub file_mode: Option<OptionalFileMode>,
    /// Owner.
    #[prost(message, optional, tag = "6")]
    pub uid: Option<OptionalUInt32>,
    /// Group.
    #[prost(message, optional, tag = "7")]
    pub gid: Option<OptionalUInt32>,
}

/// `OptionalFileMode`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalFileMode {
    /// The mode.
    #[prost(uint32, tag = "1")]
    pub value: u32,
}

/// `OptionalUInt32`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalUInt32 {
    /// The value.
    #[prost(uint32, tag = "1")]
    pub value: u32,
}

/// `ContainerAdjustment` (no field 1).
#[derive(Clone, PartialEq, prost::Message)]
pub struct ContainerAdjustment {
    /// Mounts to add.
    #[prost(message, repeated, tag = "3")]
    pub mounts: Vec<Mount>,
    /// Environment entries to add or replace.
    #[prost(message, repeated, tag = "4")]
    pub env: Vec<KeyValue>,
    /// OCI hooks to add.
    #[prost(message, optional, tag = "5")]
    pub hooks: Option<Hooks>,
    /// Linux-specific adjustments.
    #[prost(message, optional, tag = "6")]
    pub linux: Option<LinuxContainerAdjustment>,
}

/// `Hooks`: OCI hooks per stage (only the stage the plugin uses).
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hooks {
    /// Run in the container's mount namespace after its mounts, before it pivots into its root.
    #[prost(message, repeated, tag = "3")]
    pub create_container: Vec<Hook>,
}

/// `Hook`: one OCI hook.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Hook {
    /// The program, resolved in the runtime's namespace (the node's).
    #[prost(string, tag = "1")]
    pub path: String,
    /// Its argv, `argv[0]` included.
    #[prost(string, repeated, tag = "2")]
    pub args: Vec<String>,
    /// Its environment.
    #[prost(string, repeated, tag = "3")]
    pub env: Vec<String>,
    /// Seconds before the runtime gives up on it.
    #[prost(message, optional, tag = "4")]
    pub timeout: Option<OptionalInt>,
}

/// `OptionalInt`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct OptionalInt {
    /// The value.
    #[prost(int64, tag = "1")]
    pub value: i64,
}

/// `LinuxContainerAdjustment`.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LinuxContainerAdjustment {
    /// Device nodes to add.
    #[prost(message, repeated, tag = "1")]
    pub devices: Vec<LinuxDevice>,
}
