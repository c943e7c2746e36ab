//! How the scenarios reach a cluster's nodes, as far as it is not just the
//! API: which kube context helm is given, whether the nodes are kind's (so
//! images can be `kind load`ed and nodes configured by `docker exec`), and
//! how an Xid is injected on a node.
//!
//! On the kind cluster xtask made, `docker exec` into the nodes. On any other
//! cluster (`--kube-context CTX`), nothing of kind or docker: an Xid is
//! injected by an exec in the node's stager pod through the API
//! ([`crate::inject::run_api`]).

use anyhow::Result;
use kube::Client;

use crate::inject::XidAction;
use crate::names::{KindCluster, STAGER_BIN};
use crate::runner::Runner;

/// The cluster a scenario runs on, as far as it is not just the API.
#[derive(Debug, Clone, Copy)]
pub enum Reach<'a> {
    /// The kind cluster xtask made: `docker exec`.
    Kind(&'a KindCluster),
    /// Any cluster through `--kube-context`: the API only.
    Api {
        /// The kube context.
        context: &'a str,
    },
}

impl Reach<'_> {
    /// The kube context helm is given.
    pub fn context(&self) -> String {
        match self {
            Reach::Kind(cluster) => cluster.context(),
            Reach::Api { context } => (*context).to_owned(),
        }
    }

    /// The kind cluster, if it is one.
    pub fn kind(&self) -> Option<&KindCluster> {
        match self {
            Reach::Kind(cluster) => Some(cluster),
            Reach::Api { .. } => None,
        }
    }

    /// Injects (or clears) an Xid on `node`; the stager's report.
    pub async fn inject<R: Runner>(
        &self,
        runner: &R,
        client: &Client,
        node: &str,
        action: XidAction,
    ) -> Result<String> {
        match self {
            Reach::Kind(cluster) => crate::inject::run(runner, cluster, node, action),
            Reach::Api { .. } => crate::inject::run_api(client, node, action).await,
        }
    }

    /// Runs the node's staged nvidia-smi with `args` (through `nvml-mock-stager nvidia-smi` in
    /// the node's stager container); its stdout.
    pub async fn nvidia_smi<R: Runner>(
        &self,
        runner: &R,
        client: &Client,
        node: &str,
        args: &[&str],
    ) -> Result<String> {
        let mut argv = vec![STAGER_BIN.to_owned(), "nvidia-smi".to_owned()];
        argv.extend(args.iter().map(|arg| (*arg).to_owned()));
        match self {
            Reach::Kind(cluster) => crate::inject::exec(runner, cluster, node, &argv),
            Reach::Api { .. } => crate::inject::exec_api(client, node, &argv).await,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn helm_gets_the_context_of_either_cluster() {
        let cluster = KindCluster::new("demo", 2).unwrap_or_else(|err| panic!("{err:#}"));
        assert_eq!(Reach::Kind(&cluster).context(), "kind-demo");
        assert!(Reach::Kind(&cluster).kind().is_some());
        let reach = Reach::Api { context: "prod" };
        assert_eq!(reach.context(), "prod");
        assert!(reach.kind().is_none());
    }
}
