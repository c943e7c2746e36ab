//! Running the real `helm` over the chart and reading back what it renders.
//!
//! `helm` is found on `PATH`, in `$(go env GOPATH)/bin`, or in the tool cache
//! of `cargo xtask` (`${CDSIM_CACHE_DIR:-/var/cache/cdsim}/bin`); when it is
//! in none of them the test fails with the `go install` command of the pinned
//! version (`manifests/versions.toml`, `[tools].helm`).

use std::{
    path::{Path, PathBuf},
    process::Command,
    sync::OnceLock,
};

use integration_tests::repo_root;
use k8s_openapi::{
    api::{
        apps::v1::DaemonSet,
        core::v1::{ConfigMap, ServiceAccount},
        rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding},
    },
    Resource,
};
use serde::{de::DeserializeOwned, Serialize};

/// The release name of the demo.
pub const RELEASE: &str = "nvml-mock";
/// The namespace of the demo.
pub const NAMESPACE: &str = "mokka";

/// The chart directory.
pub fn chart_dir() -> PathBuf {
    repo_root().join("manifests/helm/nvml-mock")
}

/// A file under `tests/chart/`.
pub fn fixture(relative: &str) -> PathBuf {
    repo_root().join("tests/chart").join(relative)
}

/// The helm binary; panics with the install command when there is none.
pub fn helm() -> &'static Path {
    static HELM: OnceLock<PathBuf> = OnceLock::new();
    HELM.get_or_init(locate_helm)
}

fn locate_helm() -> PathBuf {
    let on_path = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("helm"))
            .find(|candidate| candidate.is_file())
    });
    if let Some(path) = on_path {
        return path;
    }
    let gopath = Command::new("go")
        .args(["env", "GOPATH"])
        .current_dir(repo_root())
        .output()
        .ok()
        .filter(|out| out.status.success())
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned());
    if let Some(gopath) = gopath.filter(|it| !it.is_empty()) {
        let candidate = Path::new(&gopath).join("bin/helm");
        if candidate.is_file() {
            return candidate;
        }
    }
    let cache = std::env::var_os("CDSIM_CACHE_DIR")
        .filter(|dir| !dir.is_empty())
        .map_or_else(|| PathBuf::from("/var/cache/cdsim"), PathBuf::from);
    let candidate = cache.join("bin/helm");
    if candidate.is_file() {
        return candidate;
    }
    panic!(
        "`helm` is not on PATH, in $(go env GOPATH)/bin or in {}: install it with \
         `go install helm.sh/helm/v3/cmd/helm@{}`",
        cache.join("bin").display(),
        pinned_helm_version()
    )
}

/// `[tools].helm` from `manifests/versions.toml`.
pub fn pinned_helm_version() -> String {
    integration_tests::pin("tools", "helm")
}

/// Runs helm with `args` in the repository root; returns (success, stdout, stderr).
pub fn run_helm(args: &[String]) -> (bool, String, String) {
    let out = Command::new(helm())
        .args(args)
        .current_dir(repo_root())
        .env(
            "HELM_CACHE_HOME",
            std::env::temp_dir().join("cdsim-helm/cache"),
        )
        .env(
            "HELM_CONFIG_HOME",
            std::env::temp_dir().join("cdsim-helm/config"),
        )
        .env(
            "HELM_DATA_HOME",
            std::env::temp_dir().join("cdsim-helm/data"),
        )
        .output()
        .unwrap_or_else(|err| panic!("cannot run {}: {err}", helm().display()));
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// One `helm template` invocation, built up from values.
#[derive(Debug, Clone)]
pub struct Template {
    release: String,
    values: Vec<String>,
}

impl Template {
    /// The chart's defaults, release `nvml-mock` in `mokka`.
    pub fn defaults() -> Template {
        Template {
            release: RELEASE.to_owned(),
            values: Vec::new(),
        }
    }

    /// The demo's values: `tests/chart/values/demo.yaml` (what `cargo xtask`
    /// passes) plus `manifests/demo/topology.yaml`.
    pub fn demo() -> Template {
        Template::defaults()
            .values(&fixture("values/demo.yaml"))
            .values(&repo_root().join("manifests/demo/topology.yaml"))
    }

    /// Another release name.
    pub fn release(mut self, release: &str) -> Template {
        release.clone_into(&mut self.release);
        self
    }

    /// `--set key=value`.
    pub fn set(mut self, assignment: &str) -> Template {
        self.values
            .extend(["--set".to_owned(), assignment.to_owned()]);
        self
    }

    /// `--set-string key=value`.
    pub fn set_string(mut self, assignment: &str) -> Template {
        self.values
            .extend(["--set-string".to_owned(), assignment.to_owned()]);
        self
    }

    /// `--set-json key=json`.
    pub fn set_json(mut self, assignment: &str) -> Template {
        self.values
            .extend(["--set-json".to_owned(), assignment.to_owned()]);
        self
    }

    /// `-f file`.
    pub fn values(mut self, file: &Path) -> Template {
        self.values
            .extend(["-f".to_owned(), file.display().to_string()]);
        self
    }

    /// `-f` with an inline values document (written to a temp file).
    pub fn values_yaml(self, yaml: &str) -> Template {
        let file = tempfile::Builder::new()
            .suffix(".yaml")
            .tempfile()
            .unwrap_or_else(|err| panic!("cannot create a temp values file: {err}"));
        std::fs::write(file.path(), yaml)
            .unwrap_or_else(|err| panic!("cannot write {}: {err}", file.path().display()));
        // Keep the file for the life of the test process: helm reads it later.
        let (_, path) = file
            .keep()
            .unwrap_or_else(|err| panic!("cannot keep a temp values file: {err}"));
        self.values(&path)
    }

    fn args(&self) -> Vec<String> {
        let mut args = vec![
            "template".to_owned(),
            self.release.clone(),
            chart_dir().display().to_string(),
            "--namespace".to_owned(),
            NAMESPACE.to_owned(),
        ];
        args.extend(self.values.iter().cloned());
        args
    }

    /// The rendered manifests as text; panics with helm's error when the render fails.
    pub fn text(&self) -> String {
        let (ok, stdout, stderr) = run_helm(&self.args());
        assert!(ok, "helm {:?} failed:\n{stderr}", self.args());
        stdout
    }

    /// The rendered objects; panics with helm's error when the render fails.
    pub fn render(&self) -> Rendered {
        Rendered::parse(&self.text())
    }

    /// helm's error; panics when the render succeeds.
    pub fn error(&self) -> String {
        let (ok, stdout, stderr) = run_helm(&self.args());
        assert!(
            !ok,
            "helm {:?} succeeded but should have failed; it rendered:\n{stdout}",
            self.args()
        );
        stderr
    }
}

/// The documents of one render, in order.
#[derive(Debug)]
pub struct Rendered {
    /// Each object as YAML.
    pub objects: Vec<serde_yaml::Value>,
}

impl Rendered {
    /// Splits helm's multi-document output; empty documents are dropped.
    pub fn parse(text: &str) -> Rendered {
        let mut objects = Vec::new();
        for document in serde_yaml::Deserializer::from_str(text) {
            let value = <serde_yaml::Value as serde::Deserialize>::deserialize(document)
                .unwrap_or_else(|err| panic!("helm rendered invalid YAML: {err}\n{text}"));
            if !value.is_null() {
                objects.push(value);
            }
        }
        Rendered { objects }
    }

    /// (kind, name) of every object, in render order.
    pub fn kinds_and_names(&self) -> Vec<(String, String)> {
        self.objects
            .iter()
            .map(|object| {
                let kind = object["kind"].as_str().unwrap_or_default().to_owned();
                let name = object["metadata"]["name"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                (kind, name)
            })
            .collect()
    }

    /// Whether an object of `kind` named `name` was rendered.
    pub fn has(&self, kind: &str, name: &str) -> bool {
        self.find(kind, name).is_some()
    }

    fn find(&self, kind: &str, name: &str) -> Option<&serde_yaml::Value> {
        self.objects.iter().find(|object| {
            object["kind"].as_str() == Some(kind)
                && object["metadata"]["name"].as_str() == Some(name)
        })
    }

    /// The object `name` of the Kubernetes type `T`, parsed strictly.
    pub fn get<T>(&self, name: &str) -> T
    where
        T: Resource + DeserializeOwned + Serialize,
    {
        let object = self.find(T::KIND, name).unwrap_or_else(|| {
            panic!(
                "no {} {name} in the render; it has {:?}",
                T::KIND,
                self.kinds_and_names()
            )
        });
        strict(object)
    }

    /// A DaemonSet.
    pub fn daemon_set(&self, name: &str) -> DaemonSet {
        self.get(name)
    }

    /// A ConfigMap.
    pub fn config_map(&self, name: &str) -> ConfigMap {
        self.get(name)
    }

    /// A ClusterRole.
    pub fn cluster_role(&self, name: &str) -> ClusterRole {
        self.get(name)
    }

    /// A ClusterRoleBinding.
    pub fn cluster_role_binding(&self, name: &str) -> ClusterRoleBinding {
        self.get(name)
    }

    /// A Role.
    pub fn role(&self, name: &str) -> Role {
        self.get(name)
    }

    /// A RoleBinding.
    pub fn role_binding(&self, name: &str) -> RoleBinding {
        self.get(name)
    }

    /// A ServiceAccount.
    pub fn service_account(&self, name: &str) -> ServiceAccount {
        self.get(name)
    }
}

/// Parses `value` as `T` and requires that nothing was lost: serializing the
/// typed object again must give back the same document. k8s-openapi ignores
/// unknown and misplaced fields when it deserializes; this catches them.
pub fn strict<T>(value: &serde_yaml::Value) -> T
where
    T: Resource + DeserializeOwned + Serialize,
{
    let json = serde_json::to_value(value)
        .unwrap_or_else(|err| panic!("{} is not JSON-compatible: {err}", T::KIND));
    let typed: T = serde_json::from_value(json.clone()).unwrap_or_else(|err| {
        panic!(
            "not a valid {} {}: {err}\n{json:#}",
            T::API_VERSION,
            T::KIND
        )
    });
    let again = serde_json::to_value(&typed)
        .unwrap_or_else(|err| panic!("cannot serialize {}: {err}", T::KIND));
    if let Some(difference) = first_difference("", &json, &again) {
        panic!(
            "{} {} does not match its API type at {difference}\n{json:#}",
            T::API_VERSION,
            T::KIND
        );
    }
    typed
}

/// The JSON pointer of the first place where `want` and `got` differ.
fn first_difference(
    pointer: &str,
    want: &serde_json::Value,
    got: &serde_json::Value,
) -> Option<String> {
    use serde_json::Value;
    match (want, got) {
        (Value::Object(want), Value::Object(got)) => {
            for (key, value) in want {
                let here = format!("{pointer}/{key}");
                match got.get(key) {
                    Some(other) => {
                        if let Some(found) = first_difference(&here, value, other) {
                            return Some(found);
                        }
                    }
                    None => return Some(format!("{here} (unknown to the API type)")),
                }
            }
            got.keys()
                .find(|key| !want.contains_key(*key))
                .map(|key| format!("{pointer}/{key} (added by the API type)"))
        }
        (Value::Array(want), Value::Array(got)) => {
            if want.len() != got.len() {
                return Some(format!(
                    "{pointer} (length {} vs {})",
                    want.len(),
                    got.len()
                ));
            }
            want.iter()
                .zip(got)
                .enumerate()
                .find_map(|(index, (want, got))| {
                    first_difference(&format!("{pointer}/{index}"), want, got)
                })
        }
        _ if want == got => None,
        _ => Some(format!("{pointer} ({want} became {got})")),
    }
}

/// The container `name` of a DaemonSet.
pub fn container<'a>(
    daemon_set: &'a DaemonSet,
    name: &str,
) -> &'a k8s_openapi::api::core::v1::Container {
    pod_spec(daemon_set)
        .containers
        .iter()
        .find(|container| container.name == name)
        .unwrap_or_else(|| panic!("DaemonSet has no container {name}"))
}

/// The pod spec of a DaemonSet.
pub fn pod_spec(daemon_set: &DaemonSet) -> &k8s_openapi::api::core::v1::PodSpec {
    daemon_set
        .spec
        .as_ref()
        .and_then(|spec| spec.template.spec.as_ref())
        .unwrap_or_else(|| panic!("DaemonSet has no pod spec"))
}

/// The container's args.
pub fn args(container: &k8s_openapi::api::core::v1::Container) -> Vec<&str> {
    container
        .args
        .iter()
        .flatten()
        .map(String::as_str)
        .collect()
}
