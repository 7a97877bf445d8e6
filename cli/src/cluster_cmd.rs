//! `cadre node`, and the coordinator's side of `cadre workflow run|resume
//! --nodes`: the cluster secret, the node's settings from the flags, what
//! both sides print about their peers.

use std::net::{SocketAddr, ToSocketAddrs};
use std::path::{Path, PathBuf};
use std::time::Duration;

use cadre_runtime::Mode;
use cadre_runtime::config::ClusterSettings;
use cadre_runtime::permission::Posture;
use cadre_runtime::permission::rules::{PermissionRules, RuleKind};
use cadre_workflows::cluster::admit::{Ceiling, Mapping};
use cadre_workflows::cluster::guard::PreAuthLimits;
use cadre_workflows::cluster::link::LinkNotice;
use cadre_workflows::cluster::node::{NodeConfig, Notice};
use cadre_workflows::cluster::server::{PeerEvent, ServerConfig};
use cadre_workflows::cluster::{
    Cluster, Coordinator, CoordinatorConfig, HEARTBEAT, HEARTBEAT_TIMEOUT,
};
use cadre_workflows::{Host, RunError};

use crate::args::{ClusterArgs, NodeArgs};
use crate::config::{Environment, RunConfig};
use crate::exit::{self, CliError};
use crate::launch::{host_error, session_options};

/// The variable holding the cluster secret.
const SECRET_VAR: &str = "CADRE_CLUSTER_SECRET";

/// How long a coordinator waits for the nodes it dialed to join.
const JOIN_TIMEOUT: Duration = Duration::from_secs(10);

/// The secret: the file's content (trimmed), else `$CADRE_CLUSTER_SECRET`;
/// none is an error.
fn secret(file: Option<&Path>, env: &Environment) -> Result<String, CliError> {
    let secret = match file {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| CliError::usage(format!("--secret-file {}: {e}", file.display())))?
            .trim()
            .to_string(),
        None => env
            .vars
            .iter()
            .find(|(k, _)| k == SECRET_VAR)
            .map(|(_, v)| v.trim().to_string())
            .unwrap_or_default(),
    };
    if secret.is_empty() {
        return Err(CliError::usage(
            cadre_workflows::cluster::ClusterError::NoSecret.to_string(),
        ));
    }
    Ok(secret)
}

fn address(text: &str, flag: &str) -> Result<SocketAddr, CliError> {
    text.to_socket_addrs()
        .ok()
        .and_then(|mut a| a.next())
        .ok_or_else(|| CliError::usage(format!("{flag} {text}: not an address (HOST:PORT)")))
}

/// `PATH` or `COORDINATOR=LOCAL`, the local side an existing directory.
fn mapping(text: &str) -> Result<Mapping, CliError> {
    let (coordinator, local) = text.split_once('=').unwrap_or((text, text));
    let local = Path::new(local)
        .canonicalize()
        .map_err(|e| CliError::usage(format!("--serve {text}: {local}: {e}")))?;
    let coordinator = PathBuf::from(coordinator);
    if !coordinator.is_absolute() {
        return Err(CliError::usage(format!(
            "--serve {text}: the coordinator's path must be absolute"
        )));
    }
    // The same path on both sides is spelled as this machine resolves it.
    let coordinator = if text.contains('=') {
        coordinator
    } else {
        local.clone()
    };
    Ok(Mapping { coordinator, local })
}

/// What the node lets any agent do at most: the flags' mode and posture
/// when given (else no narrowing), the configuration's and the flags' deny
/// and ask rules.
fn ceiling(config: &RunConfig) -> Ceiling {
    let mut rules = PermissionRules::default();
    for rule in config.rules.iter() {
        match rule.kind() {
            RuleKind::Deny => rules.deny.push(rule.text().to_string()),
            RuleKind::Ask => rules.ask.push(rule.text().to_string()),
            RuleKind::Allow => {}
        }
    }
    Ceiling {
        mode: if config.mode_given {
            config.mode
        } else {
            Mode::Operate
        },
        posture: if config.posture_given {
            config.posture
        } else {
            Posture::Bypass
        },
        rules,
    }
}

/// `cadre node`: serves until interrupted.
pub async fn node(
    args: NodeArgs,
    env: Environment,
    config_dir: Option<PathBuf>,
) -> Result<u8, CliError> {
    let NodeArgs {
        listen,
        connect,
        slots,
        name,
        serve: served,
        secret_file,
        handshake_timeout_ms,
        max_unauthenticated,
        session,
    } = args;
    if session.resume.is_some() || session.continue_latest {
        return Err(CliError::usage(
            "--resume and --continue are for sessions; a node runs the agents it is sent",
        ));
    }
    let secret = secret(secret_file.as_deref(), &env)?;
    let files = crate::load_config(&session, &env, config_dir.as_deref())?;
    let defaults = crate::load_defaults(config_dir.as_deref())?;
    let mut config = RunConfig::from_session(session, env, files, defaults)?;
    config.sandbox.protected.extend(config_dir.clone());
    config.protect_config_dir(config_dir.as_deref());
    let listen = address(&listen, "--listen")?;
    let name = name.unwrap_or_else(|| format!("node-{}", listen.port()));
    let slots = slots.max(1);
    let served = served
        .iter()
        .map(|s| mapping(s))
        .collect::<Result<Vec<_>, _>>()?;
    let scratch = std::env::temp_dir().join(format!("cadre-{name}-{}", std::process::id()));
    // Agents keep their conversations in memory: the coordinator's store
    // keeps what must survive.
    // The node's own `[context]` (its summaries' model) and providers.
    let sessions = cadre_actors::Host::builder(&scratch)
        .memory_store()
        .model(config.model.clone())
        .retry(config.retry)
        .response_limits(config.response_limits)
        .tool_timeout(config.tool_timeout)
        .file_limits(config.limits)
        .providers(config.providers.clone())
        .context(config.context.clone())
        .sandbox(config.sandbox.clone());
    let host = Host::build(sessions, None).await.map_err(host_error)?;
    let mut options = session_options(&config, false);
    if let Some(first) = served.first() {
        options.workspace = first.local.clone();
    }
    let node_config = NodeConfig {
        name: name.clone(),
        slots,
        served,
        ceiling: ceiling(&config),
        files: scratch.clone(),
        heartbeat: HEARTBEAT,
        timeout: HEARTBEAT_TIMEOUT,
    };
    let server = ServerConfig {
        name: name.clone(),
        secret,
        listen,
        limits: PreAuthLimits {
            handshake: Duration::from_millis(handshake_timeout_ms.max(1)),
            pending: max_unauthenticated.max(1),
            ..PreAuthLimits::default()
        },
    };
    let mut handle = host
        .serve_node(&server, node_config, &options, &connect)
        .await
        .map_err(|e| match e {
            RunError::Host(e) => host_error(e),
            other @ (RunError::Start(_) | RunError::Cluster(_)) => {
                CliError::usage(other.to_string())
            }
        })?;
    crate::outln!("cadre node {name} listening on {listen} ({slots} slots)");
    let mut terminate =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
            .map_err(|e| CliError::internal(format!("cannot watch for SIGTERM: {e}")))?;
    loop {
        tokio::select! {
            Some(notice) = handle.notices.recv() => crate::errln!("cadre node {name}: {}", node_notice(&notice)),
            Some(peer) = handle.peers.recv() => crate::errln!("cadre node {name}: {}", peer_notice(&peer)),
            _ = tokio::signal::ctrl_c() => break,
            _ = terminate.recv() => break,
            _ = &mut handle.join => break,
        }
    }
    handle.stop();
    let _ = std::fs::remove_dir_all(&scratch);
    Ok(exit::SUCCESS)
}

fn node_notice(notice: &Notice) -> String {
    match notice {
        Notice::Started { coordinator, agent } => {
            format!("started agent {agent} for {coordinator}")
        }
        Notice::Refused {
            coordinator,
            reason,
        } => format!("refused an order of {coordinator}: {reason}"),
        Notice::CoordinatorGone {
            coordinator,
            stopped,
        } => format!("{coordinator} stopped polling; {stopped} of its agents stopped"),
    }
}

fn peer_notice(peer: &PeerEvent) -> String {
    match peer {
        PeerEvent::Ready { addr, .. } => format!("peer at {addr} joined"),
        PeerEvent::Gone {
            addr,
            authenticated: false,
            ..
        } => format!("refused a peer at {addr}: it did not prove the cluster secret"),
        PeerEvent::Gone { addr, .. } => format!("peer at {addr} left"),
    }
}

/// The coordinator's cluster when nodes are named (by the flags or the
/// configuration) or a listen address is given; `None` otherwise, and
/// then nothing of the cluster starts.
pub async fn coordinator(
    args: &ClusterArgs,
    settings: &ClusterSettings,
    env: &Environment,
) -> Result<Option<Cluster>, CliError> {
    let nodes = if args.nodes.is_empty() {
        settings.nodes.clone().unwrap_or_default()
    } else {
        args.nodes.clone()
    };
    if nodes.is_empty() && args.cluster_listen.is_none() {
        return Ok(None);
    }
    let file = args
        .secret_file
        .clone()
        .or_else(|| settings.secret_file.as_ref().map(PathBuf::from));
    let secret = secret(file.as_deref(), env)?;
    let listen = match &args.cluster_listen {
        Some(addr) => address(addr, "--cluster-listen")?,
        None => SocketAddr::from(([127, 0, 0, 1], 0)),
    };
    let config = CoordinatorConfig {
        server: ServerConfig {
            name: format!("coordinator-{}", std::process::id()),
            secret,
            listen,
            limits: PreAuthLimits::default(),
        },
        nodes,
        local_slots: args.local_slots.or(settings.local_slots).unwrap_or(0),
        join_timeout: JOIN_TIMEOUT,
        // Never below two heartbeats: a node answers at least once per one.
        timeout: Duration::from_millis(args.node_timeout).max(HEARTBEAT * 2),
    };
    let Coordinator {
        cluster,
        unreachable,
        mut notices,
    } = Cluster::join(config)
        .await
        .map_err(|e| CliError::usage(e.to_string()))?;
    for err in unreachable {
        crate::errln!("cadre: {err}");
    }
    // What happens to nodes from now on, as it happens.
    let mut pending = Vec::new();
    while let Ok(notice) = notices.try_recv() {
        pending.push(notice);
    }
    for notice in &pending {
        crate::errln!("cadre: {}", link_notice(notice));
    }
    if cluster.nodes().is_empty() {
        crate::errln!("cadre: no node joined; steps run in this process");
    }
    tokio::spawn(async move {
        while let Some(notice) = notices.recv().await {
            crate::errln!("cadre: {}", link_notice(&notice));
        }
    });
    Ok(Some(cluster))
}

fn link_notice(notice: &LinkNotice) -> String {
    match notice {
        LinkNotice::Joined(info) => format!(
            "node {} joined ({} slots; serves {})",
            info.name,
            info.slots,
            info.workspaces
                .iter()
                .map(|w| w.display().to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        LinkNotice::Lost { node, reason } => {
            format!("node {node} lost ({reason}); its steps fail and are retried elsewhere")
        }
        LinkNotice::Refused(addr) => {
            format!("the peer at {addr} refused us: it does not share the cluster secret")
        }
        LinkNotice::NameTaken(name) => {
            format!(
                "a second node calls itself {name}; the first keeps the name, the second is not used"
            )
        }
    }
}
