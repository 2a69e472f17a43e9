//! Cross-request batching: requests that arrive while the engine is busy
//! (or within `max_wait_us`) are classified together in one model run per
//! stage. One engine thread owns the ONNX Runtime sessions; a panic or model
//! error in a batch fails only that batch's requests, and the thread keeps
//! serving.

use std::panic::AssertUnwindSafe;
use std::sync::mpsc::{sync_channel, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::config::BatchingConfig;
use crate::engine::{ClassifyInput, ClassifyOutput, Engine};
use crate::metrics::Metrics;

/// Why a request got no result.
#[derive(Debug, thiserror::Error, Clone)]
pub enum BatchError {
    /// The queue is full.
    #[error("daemon overloaded: {0} requests queued")]
    Overloaded(usize),
    /// The engine thread has stopped.
    #[error("engine stopped")]
    Stopped,
    /// The engine failed on this request.
    #[error("classification failed: {0}")]
    Engine(String),
}

/// A result plus the time spent queued, microseconds.
pub type JobResult = Result<(ClassifyOutput, u64), BatchError>;

struct Job {
    input: ClassifyInput,
    enqueued: Instant,
    reply: oneshot::Sender<JobResult>,
}

/// Handle used by the gRPC service to submit work.
#[derive(Clone)]
pub struct Batcher {
    tx: SyncSender<Job>,
    capacity: usize,
    metrics: Arc<Metrics>,
}

impl Batcher {
    /// Starts the engine thread.
    pub fn start(engine: Engine, config: &BatchingConfig, metrics: Arc<Metrics>) -> Self {
        let (tx, rx) = sync_channel(config.queue_capacity);
        let max_batch = config.max_batch;
        let max_wait = Duration::from_micros(config.max_wait_us);
        let m = metrics.clone();
        std::thread::Builder::new()
            .name("semroute-engine".into())
            .spawn(move || engine_loop(engine, rx, max_batch, max_wait, m))
            .expect("spawning the engine thread at startup");
        Self {
            tx,
            capacity: config.queue_capacity,
            metrics,
        }
    }

    /// Submits one request and waits for its result.
    pub async fn classify(&self, input: ClassifyInput) -> JobResult {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            input,
            enqueued: Instant::now(),
            reply,
        };
        match self.tx.try_send(job) {
            Ok(()) => self.metrics.queue_depth.inc(),
            Err(TrySendError::Full(_)) => return Err(BatchError::Overloaded(self.capacity)),
            Err(TrySendError::Disconnected(_)) => return Err(BatchError::Stopped),
        };
        rx.await.unwrap_or(Err(BatchError::Stopped))
    }
}

fn engine_loop(
    mut engine: Engine,
    rx: Receiver<Job>,
    max_batch: usize,
    max_wait: Duration,
    metrics: Arc<Metrics>,
) {
    while let Ok(first) = rx.recv() {
        let mut jobs = vec![first];
        let deadline = Instant::now() + max_wait;
        while jobs.len() < max_batch {
            match rx.try_recv() {
                Ok(j) => jobs.push(j),
                Err(_) if max_wait.is_zero() => break,
                Err(_) => match rx.recv_timeout(deadline.saturating_duration_since(Instant::now()))
                {
                    Ok(j) => jobs.push(j),
                    Err(RecvTimeoutError::Timeout) | Err(RecvTimeoutError::Disconnected) => break,
                },
            }
        }
        metrics.queue_depth.dec_by(jobs.len() as i64);
        let abandoned = drop_abandoned(&mut jobs);
        if abandoned > 0 {
            metrics.abandoned.inc_by(abandoned as u64);
            tracing::debug!(abandoned, "skipped requests whose caller has gone");
        }
        if jobs.is_empty() {
            continue;
        }
        metrics.batch_size.observe(jobs.len() as f64);
        let started = Instant::now();
        let inputs: Vec<ClassifyInput> = jobs.iter().map(|j| j.input.clone()).collect();
        let results = run_isolated(&mut engine, &inputs, &metrics);
        let results = match results {
            Ok(r) => r.into_iter().map(Ok).collect::<Vec<_>>(),
            // Retry one by one so that one bad input fails only itself.
            Err(_) if jobs.len() > 1 => inputs
                .iter()
                .map(|i| {
                    run_isolated(&mut engine, std::slice::from_ref(i), &metrics).and_then(
                        |mut v| {
                            v.pop()
                                .ok_or_else(|| BatchError::Engine("empty result".into()))
                        },
                    )
                })
                .collect(),
            Err(e) => vec![Err(e)],
        };
        for (job, result) in jobs.into_iter().zip(results) {
            let queued = started.saturating_duration_since(job.enqueued).as_micros() as u64;
            let _ = job.reply.send(result.map(|o| (o, queued)));
        }
    }
}

/// Removes the jobs whose caller has gone (its deadline passed or the call was cancelled, so
/// the gRPC handler and its reply receiver were dropped) and returns how many. Computing them
/// would only delay the requests queued behind them, past their own deadlines.
fn drop_abandoned(jobs: &mut Vec<Job>) -> usize {
    let before = jobs.len();
    jobs.retain(|j| !j.reply.is_closed());
    before - jobs.len()
}

fn run_isolated(
    engine: &mut Engine,
    inputs: &[ClassifyInput],
    metrics: &Metrics,
) -> Result<Vec<ClassifyOutput>, BatchError> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| engine.classify_batch(inputs))) {
        Ok(Ok(out)) => Ok(out),
        Ok(Err(e)) => {
            metrics.engine_failures.inc();
            tracing::error!(error = %e, batch = inputs.len(), "engine error");
            Err(BatchError::Engine(e.to_string()))
        }
        Err(_) => {
            metrics.engine_failures.inc();
            tracing::error!(
                batch = inputs.len(),
                "engine panicked; batch failed, engine continues"
            );
            Err(BatchError::Engine("internal error in a model".into()))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job() -> (Job, oneshot::Receiver<JobResult>) {
        let (reply, rx) = oneshot::channel();
        let job = Job {
            input: ClassifyInput::default(),
            enqueued: Instant::now(),
            reply,
        };
        (job, rx)
    }

    #[test]
    fn jobs_whose_caller_has_gone_are_dropped() {
        let (a, rx_a) = job();
        let (b, rx_b) = job();
        let (c, _rx_c) = job();
        drop(rx_b);
        let mut jobs = vec![a, b, c];
        assert_eq!(drop_abandoned(&mut jobs), 1);
        assert_eq!(jobs.len(), 2);
        drop(rx_a);
        assert_eq!(drop_abandoned(&mut jobs), 1);
        assert_eq!(drop_abandoned(&mut jobs), 0);
        assert_eq!(jobs.len(), 1);
    }
}
