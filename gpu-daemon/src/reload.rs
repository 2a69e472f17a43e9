//! Configuration reload without a restart.
//!
//! On SIGHUP, and when the config file's bytes change (checked every
//! [`WATCH_INTERVAL`]: a Kubernetes ConfigMap update swaps the file under the mount), the
//! daemon reads the configuration again and loads its models beside the running ones, on a
//! blocking thread while the engine keeps serving. Then it hands the new engine to the
//! batcher, which switches between two batches ([`crate::batcher::Batcher::start`]): no call
//! in flight or queued fails. A configuration or model that does not load leaves the
//! running ones serving; the error is logged and counted
//! (`semroute_daemon_config_reloads_total{result="error"}`) and the same file is not tried
//! again until it changes or another SIGHUP arrives.
//!
//! What a reload applies: `[models]`, `[limits]`, `[runtime]` and `[cache]` (the engine is
//! rebuilt from them; the cache starts empty). `socket`, `socket_mode`, `socket_group`,
//! `metrics_addr` and `[batching]` keep their running values until a restart.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc::Sender;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::signal::unix::{signal, SignalKind};

use crate::config::{ConfigError, DaemonConfig};
use crate::engine::Engine;
use crate::metrics::{Metrics, ReloadLabel};
use crate::models::ModelError;

/// How often the config file is compared with the bytes last loaded.
pub const WATCH_INTERVAL: Duration = Duration::from_secs(5);

/// Why a reload kept the running configuration.
#[derive(Debug, thiserror::Error)]
pub enum ReloadError {
    #[error(transparent)]
    Config(#[from] ConfigError),
    #[error("loading models: {0}")]
    Models(#[from] ModelError),
    #[error("the reload task failed: {0}")]
    Task(String),
}

/// Where a reload reads its configuration: the config file (none: the built-in defaults),
/// then the command line's overrides applied again.
pub type LoadConfig = dyn Fn() -> Result<DaemonConfig, ConfigError> + Send + Sync;

/// Reloads on SIGHUP and on a changed `watch` file until the process ends; sends each
/// engine that loaded to `engines` and updates `max_text_bytes`.
pub async fn run(
    load: Arc<LoadConfig>,
    watch: Option<PathBuf>,
    engines: Sender<Engine>,
    metrics: Arc<Metrics>,
    max_text_bytes: Arc<AtomicUsize>,
) {
    let mut hangup = match signal(SignalKind::hangup()) {
        Ok(s) => s,
        Err(e) => {
            tracing::warn!(error = %e, "no SIGHUP handler: reload only on config file changes");
            return;
        }
    };
    let read = |p: &PathBuf| std::fs::read(p).ok();
    let mut loaded_bytes = watch.as_ref().and_then(read);
    let mut tick = tokio::time::interval(WATCH_INTERVAL);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
    loop {
        let trigger = tokio::select! {
            _ = hangup.recv() => "SIGHUP",
            _ = tick.tick() => {
                let now = watch.as_ref().and_then(read);
                if now.is_none() || now == loaded_bytes {
                    continue;
                }
                "config file changed"
            }
        };
        // The bytes this attempt reads: a file that fails is not retried until it changes.
        loaded_bytes = watch.as_ref().and_then(read);
        let started = Instant::now();
        let result = reload_once(load.clone()).await;
        let label = |result: &str| ReloadLabel {
            result: result.into(),
        };
        match result {
            Ok((config, engine)) => {
                max_text_bytes.store(config.limits.max_text_bytes, Ordering::Relaxed);
                if engines.send(engine).is_err() {
                    return; // the engine thread has ended: the daemon is stopping
                }
                metrics.config_reloads.get_or_create(&label("ok")).inc();
                tracing::info!(
                    trigger,
                    ms = started.elapsed().as_millis() as u64,
                    "configuration reloaded: new models serve from the next batch \
                     (socket, metrics_addr and [batching] keep their values until a restart)"
                );
            }
            Err(e) => {
                metrics.config_reloads.get_or_create(&label("error")).inc();
                tracing::error!(
                    trigger,
                    error = %e,
                    "configuration reload failed: still serving the previous configuration and models"
                );
            }
        }
    }
}

/// Reads the configuration and loads its models on a blocking thread.
async fn reload_once(load: Arc<LoadConfig>) -> Result<(DaemonConfig, Engine), ReloadError> {
    tokio::task::spawn_blocking(move || {
        let config = load()?;
        let engine = Engine::load(&config)?;
        Ok((config, engine))
    })
    .await
    .map_err(|e| ReloadError::Task(e.to_string()))?
}
