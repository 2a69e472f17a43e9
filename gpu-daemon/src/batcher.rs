//! Cross-request batching with deadline-aware admission.
//!
//! Requests that arrive while the engine is busy (or within `max_wait_us`) are classified
//! together in one model run per stage. One engine thread owns the ONNX Runtime sessions; a
//! panic or model error in a batch fails only that batch's requests, and the thread keeps
//! serving.
//!
//! The queue knows each call's deadline (the `grpc-timeout` its caller sent) and keeps a
//! running estimate of engine time ([`ServiceEstimate`]), so that under overload it answers
//! at once the calls it cannot finish in time instead of computing answers nobody waits for:
//!
//! - **at submit**, a call whose estimated finish (the work queued and running ahead of it,
//!   then its own) lies past its deadline is refused ([`BatchError::WouldMissDeadline`]);
//!   the caller (the filter) applies its failure mode at once instead of at its timeout.
//!   A call without a deadline is admitted as long as the queue has room.
//! - **when the engine takes a batch**, calls whose caller has gone are dropped, calls whose
//!   deadline has passed, or would pass before they could finish if started now, are
//!   answered [`BatchError::Expired`] without being computed, and a batch grows only while
//!   every call in it can still finish by its deadline.
//!
//! Work is counted in units: one per call plus one per KiB of its text (`text` and
//! `scan_text`), so that a long text weighs more than a short one; the estimate is engine
//! time per unit, learnt from every batch.
//!
//! With `batching.admission = false` the queue ignores deadlines: a plain FIFO that runs
//! every call it admitted while the queue has room, skipping only calls whose caller has
//! gone (the behaviour before admission, kept as a benchmark baseline).

use std::collections::VecDeque;
use std::panic::AssertUnwindSafe;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

use crate::config::BatchingConfig;
use crate::engine::{ClassifyInput, ClassifyOutput, Engine, EngineError};
use crate::metrics::{Metrics, ShedLabel};

/// Why a request got no result.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum BatchError {
    /// The queue is full.
    #[error("daemon overloaded: {0} requests queued")]
    QueueFull(usize),
    /// Refused at submit: by the estimate, the call would finish after its deadline.
    #[error(
        "daemon overloaded: the call would finish in about {} ms, past its deadline in {} ms",
        .estimate.as_millis(),
        .budget.as_millis()
    )]
    WouldMissDeadline {
        /// Estimated time from submit to the call's answer.
        estimate: Duration,
        /// Time from submit to the call's deadline.
        budget: Duration,
    },
    /// Dropped from the queue unrun: its deadline passed, or would before it could finish.
    #[error("the call's deadline passed, or would pass before it could be classified, while it was queued")]
    Expired,
    /// The engine thread has stopped.
    #[error("engine stopped")]
    Stopped,
    /// The engine failed on this request.
    #[error("classification failed: {0}")]
    Engine(EngineFailure),
}

/// How the engine failed on a request.
#[derive(Debug, thiserror::Error, Clone, PartialEq)]
pub enum EngineFailure {
    /// The engine returned an error for the request's batch; its message, which every
    /// request of the batch gets.
    #[error("{0}")]
    Error(String),
    /// The engine panicked on the request's batch (it goes on with the next batch).
    #[error("internal error in a model")]
    Panicked,
    /// The engine gave another number of results than its batch had inputs.
    #[error("internal error in a model: {results} results for {inputs} inputs")]
    ResultCount {
        /// Inputs of the batch.
        inputs: usize,
        /// Results the engine gave.
        results: usize,
    },
}

/// A result plus the time spent queued, microseconds.
pub type JobResult = Result<(ClassifyOutput, u64), BatchError>;

/// Runs one batch of inputs; one result per input, or an error for the whole batch.
pub type RunBatch = dyn FnMut(&[ClassifyInput]) -> Result<Vec<ClassifyOutput>, EngineError> + Send;

/// Engine time per work unit assumed before any batch has been measured: conservative (a
/// 500-token request costs about a third of this per unit on two CPU cores), so that a
/// daemon that has not measured itself yet admits little work ahead of a deadline.
pub const SEED_PER_UNIT: Duration = Duration::from_millis(100);

/// The fastest engine time per unit an idle engine takes as possible before it has
/// measured anything faster: it still runs a call that its estimate says would miss its
/// deadline when the call could finish in time at that speed (see [`Backlog::admit`]). A
/// floor that measurements only lower, never raise: a first batch slowed by a cold start
/// (or a busy machine) must not make every later call look hopeless.
pub const SEED_FASTEST_PER_UNIT: Duration = Duration::from_millis(5);

/// Weight of a new sample in the running mean (and of a new deviation in the mean
/// deviation): the smoothing of TCP's retransmission timer (RFC 6298).
const MEAN_GAIN: f64 = 1.0 / 8.0;
const DEVIATION_GAIN: f64 = 1.0 / 4.0;

/// Work units of one call: one, plus one per KiB of its text.
pub fn work_units(input: &ClassifyInput) -> f64 {
    1.0 + (input.text.len() + input.scan_text.len()) as f64 / 1024.0
}

/// Running estimate of engine time per work unit, from the batches run so far.
#[derive(Debug, Clone, PartialEq)]
pub struct ServiceEstimate {
    /// Mean seconds per unit.
    mean: f64,
    /// Mean absolute deviation of the samples from the mean, seconds per unit.
    deviation: f64,
    /// Fewest seconds per unit of any batch, or of the seed if fewer.
    fastest: f64,
    /// Batches measured.
    samples: u64,
}

impl ServiceEstimate {
    /// An estimate before any measurement: `per_unit` with no deviation, and
    /// `fastest_per_unit` as the fastest speed seen.
    pub fn seeded(per_unit: Duration, fastest_per_unit: Duration) -> Self {
        Self {
            mean: per_unit.as_secs_f64(),
            deviation: 0.0,
            fastest: fastest_per_unit.as_secs_f64(),
            samples: 0,
        }
    }

    /// Takes in a batch of `units` that the engine ran in `elapsed`. The first measurement
    /// replaces the seeded mean (with half of it as deviation); later ones are smoothed in.
    pub fn observe(&mut self, elapsed: Duration, units: f64) {
        if units <= 0.0 {
            return;
        }
        let sample = elapsed.as_secs_f64() / units;
        if self.samples == 0 {
            self.mean = sample;
            self.deviation = sample / 2.0;
        } else {
            self.deviation += DEVIATION_GAIN * ((sample - self.mean).abs() - self.deviation);
            self.mean += MEAN_GAIN * (sample - self.mean);
        }
        self.fastest = self.fastest.min(sample);
        self.samples += 1;
    }

    /// Seconds per unit that admission plans with: the mean plus the mean deviation.
    pub fn planned(&self) -> f64 {
        self.mean + self.deviation
    }

    /// Mean seconds per unit.
    pub fn mean(&self) -> f64 {
        self.mean
    }

    /// Batches measured so far.
    pub fn samples(&self) -> u64 {
        self.samples
    }
}

fn secs(s: f64) -> Duration {
    Duration::try_from_secs_f64(s.max(0.0)).unwrap_or(Duration::MAX)
}

/// The work the engine has: queued calls and the batch it is running, with the estimate
/// that turns it into time.
#[derive(Debug, Clone)]
pub struct Backlog {
    /// Calls queued.
    pub queued: usize,
    /// Their work units.
    pub queued_units: f64,
    /// The batch the engine runs: when it started and its units.
    pub running: Option<(Instant, f64)>,
    /// Engine time per unit.
    pub estimate: ServiceEstimate,
}

/// How a call was admitted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Admitted {
    /// Its estimated finish is within its deadline, or it has none.
    Planned,
    /// The engine is idle, and the call could finish in time at the fastest speed seen,
    /// though not by the estimate: it runs, so that an estimate grown too pessimistic (a
    /// slow spell of the machine) is measured again rather than refusing every call
    /// forever. Never dropped for predicted lateness, only once its deadline has passed.
    Probe,
}

impl Backlog {
    /// An empty backlog.
    pub fn new(estimate: ServiceEstimate) -> Self {
        Self {
            queued: 0,
            queued_units: 0.0,
            running: None,
            estimate,
        }
    }

    /// Estimated engine time until everything queued and running is done.
    pub fn ahead(&self, now: Instant) -> Duration {
        let per_unit = self.estimate.planned();
        let running = self
            .running
            .map(|(started, units)| {
                (started + secs(units * per_unit)).saturating_duration_since(now)
            })
            .unwrap_or_default();
        running + secs(self.queued_units * per_unit)
    }

    /// Whether a call of `units` with `deadline` is admitted at `now`: `Err` holds the
    /// estimated time to its answer, past its deadline.
    pub fn admit(
        &self,
        now: Instant,
        units: f64,
        deadline: Option<Instant>,
    ) -> Result<Admitted, Duration> {
        let Some(deadline) = deadline else {
            return Ok(Admitted::Planned);
        };
        let finish = self.ahead(now) + secs(units * self.estimate.planned());
        if now + finish <= deadline {
            return Ok(Admitted::Planned);
        }
        let idle = self.queued == 0 && self.running.is_none();
        if idle && now + secs(units * self.estimate.fastest) <= deadline {
            return Ok(Admitted::Probe);
        }
        Err(finish)
    }
}

struct Job {
    input: ClassifyInput,
    units: f64,
    enqueued: Instant,
    deadline: Option<Instant>,
    admitted: Admitted,
    reply: oneshot::Sender<JobResult>,
}

impl Job {
    /// Whether the job can no longer be answered in time if started at `now`, taking
    /// `per_unit` seconds per unit: its deadline has passed, or (unless it is a probe)
    /// would before it could finish.
    fn hopeless(&self, now: Instant, per_unit: f64) -> bool {
        self.deadline.is_some_and(|d| {
            d <= now || (self.admitted != Admitted::Probe && now + secs(self.units * per_unit) > d)
        })
    }
}

struct State {
    jobs: VecDeque<Job>,
    backlog: Backlog,
    /// Every handle has been dropped: the engine thread ends once the queue is empty.
    closed: bool,
}

struct Shared {
    state: Mutex<State>,
    /// Signalled when a job is queued or the queue is closed.
    wake: Condvar,
    /// Cleared when the engine thread ends.
    engine_alive: AtomicBool,
    capacity: usize,
    /// Deadline-based admission and expiry (`batching.admission`).
    admission: bool,
    metrics: Arc<Metrics>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        // The state stays consistent across a panic (none can happen while it is held).
        self.state.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Publishes the backlog's gauges; called with the state locked, after each change.
    fn publish(&self, state: &State, now: Instant) {
        let m = &self.metrics;
        m.queue_depth.set(state.jobs.len() as i64);
        m.service_time_estimate
            .set(state.backlog.estimate.planned());
        m.queued_work.set(state.backlog.ahead(now).as_secs_f64());
    }

    fn shed(&self, reason: &str, n: usize) {
        if n > 0 {
            self.metrics
                .shed
                .get_or_create(&ShedLabel {
                    reason: reason.into(),
                })
                .inc_by(n as u64);
        }
    }
}

/// Closes the queue when the last [`Batcher`] handle is dropped.
struct Closer(Arc<Shared>);

impl Drop for Closer {
    fn drop(&mut self) {
        self.0.lock().closed = true;
        self.0.wake.notify_all();
    }
}

/// Handle used by the gRPC service to submit work.
#[derive(Clone)]
pub struct Batcher {
    shared: Arc<Shared>,
    _closer: Arc<Closer>,
}

/// Marks the engine thread gone when it ends, by return or by panic.
struct AliveGuard(Arc<Shared>);

impl Drop for AliveGuard {
    fn drop(&mut self) {
        self.0.engine_alive.store(false, Ordering::SeqCst);
    }
}

impl Batcher {
    /// Starts the engine thread on `engine`. An engine sent on `reloads` (a reloaded
    /// configuration's models, loaded beside the running ones) replaces it between two
    /// batches: the batch in progress finishes on the old models, the next one runs on the
    /// new, and no queued call fails; the old engine is dropped then.
    pub fn start(
        engine: Engine,
        reloads: std::sync::mpsc::Receiver<Engine>,
        config: &BatchingConfig,
        metrics: Arc<Metrics>,
    ) -> Self {
        let mut engine = engine;
        Self::start_with(
            Box::new(move |inputs: &[ClassifyInput]| {
                if let Some(newest) = reloads.try_iter().last() {
                    engine = newest;
                }
                engine.classify_batch(inputs)
            }),
            config,
            ServiceEstimate::seeded(SEED_PER_UNIT, SEED_FASTEST_PER_UNIT),
            metrics,
        )
    }

    /// Starts an engine thread that runs batches with `run`, estimating service time from
    /// `estimate` on.
    pub fn start_with(
        run: Box<RunBatch>,
        config: &BatchingConfig,
        estimate: ServiceEstimate,
        metrics: Arc<Metrics>,
    ) -> Self {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                jobs: VecDeque::new(),
                backlog: Backlog::new(estimate),
                closed: false,
            }),
            wake: Condvar::new(),
            engine_alive: AtomicBool::new(true),
            capacity: config.queue_capacity,
            admission: config.admission,
            metrics,
        });
        shared.publish(&shared.lock(), Instant::now());
        let max_batch = config.max_batch.max(1);
        let max_wait = Duration::from_micros(config.max_wait_us);
        let engine_side = shared.clone();
        std::thread::Builder::new()
            .name("semroute-engine".into())
            .spawn(move || {
                let _alive = AliveGuard(engine_side.clone());
                engine_loop(run, &engine_side, max_batch, max_wait)
            })
            .expect("spawning the engine thread at startup");
        Self {
            _closer: Arc::new(Closer(shared.clone())),
            shared,
        }
    }

    /// Submits one request that must be answered by `deadline` (none: no limit) and waits
    /// for its result. A call that cannot be answered in time by the estimate is refused
    /// at once with [`BatchError::WouldMissDeadline`]. Without admission
    /// (`batching.admission = false`) the deadline is ignored: the call is queued and run.
    pub async fn classify(&self, input: ClassifyInput, deadline: Option<Instant>) -> JobResult {
        let rx = self.submit(input, deadline)?;
        rx.await.unwrap_or(Err(BatchError::Stopped))
    }

    fn submit(
        &self,
        input: ClassifyInput,
        deadline: Option<Instant>,
    ) -> Result<oneshot::Receiver<JobResult>, BatchError> {
        let shared = &self.shared;
        if !shared.engine_alive.load(Ordering::SeqCst) {
            return Err(BatchError::Stopped);
        }
        let units = work_units(&input);
        let now = Instant::now();
        // Without admission no call has a deadline for the queue: none is refused, expired
        // or keeps a batch from growing.
        let deadline = deadline.filter(|_| shared.admission);
        let mut state = shared.lock();
        if state.jobs.len() >= shared.capacity {
            drop(state);
            shared.shed("queue_full", 1);
            return Err(BatchError::QueueFull(shared.capacity));
        }
        let admitted = match state.backlog.admit(now, units, deadline) {
            Ok(a) => a,
            Err(estimate) => {
                drop(state);
                shared.shed("deadline", 1);
                let budget = deadline.map_or(Duration::ZERO, |d| d.saturating_duration_since(now));
                return Err(BatchError::WouldMissDeadline { estimate, budget });
            }
        };
        let (reply, rx) = oneshot::channel();
        state.jobs.push_back(Job {
            input,
            units,
            enqueued: now,
            deadline,
            admitted,
            reply,
        });
        state.backlog.queued += 1;
        state.backlog.queued_units += units;
        shared.publish(&state, now);
        drop(state);
        shared.wake.notify_one();
        Ok(rx)
    }
}

/// What the engine takes from the queue at once.
struct Take {
    batch: Vec<Job>,
    expired: Vec<Job>,
    abandoned: usize,
}

/// Removes from `state` the jobs whose caller has gone and those that can no longer be
/// answered in time (by the mean estimate, starting `now`), then takes up to `max_batch`
/// jobs in order while every job taken can still finish by its deadline if the batch
/// starts `now`. The jobs taken count as running.
fn take(state: &mut State, now: Instant, max_batch: usize) -> Take {
    let per_unit = state.backlog.estimate.mean();
    let mut out = Take {
        batch: Vec::new(),
        expired: Vec::new(),
        abandoned: 0,
    };
    let mut kept = VecDeque::with_capacity(state.jobs.len());
    for job in state.jobs.drain(..) {
        if job.reply.is_closed() {
            out.abandoned += 1;
        } else if job.hopeless(now, per_unit) {
            out.expired.push(job);
        } else {
            kept.push_back(job);
        }
    }
    state.jobs = kept;
    let mut units = 0.0;
    let mut earliest: Option<Instant> = None;
    while out.batch.len() < max_batch {
        let Some(next) = state.jobs.front() else {
            break;
        };
        let with_next = earliest.into_iter().chain(next.deadline).min();
        if !out.batch.is_empty()
            && with_next.is_some_and(|d| now + secs((units + next.units) * per_unit) > d)
        {
            break;
        }
        earliest = with_next;
        units += next.units;
        if let Some(job) = state.jobs.pop_front() {
            out.batch.push(job);
        }
    }
    let b = &mut state.backlog;
    b.queued = state.jobs.len();
    b.queued_units = state.jobs.iter().map(|j| j.units).sum();
    b.running = (!out.batch.is_empty()).then_some((now, units));
    out
}

fn engine_loop(mut run: Box<RunBatch>, shared: &Shared, max_batch: usize, max_wait: Duration) {
    let metrics = &shared.metrics;
    loop {
        let mut state = shared.lock();
        while state.jobs.is_empty() {
            if state.closed {
                return;
            }
            state = shared.wake.wait(state).unwrap_or_else(|e| e.into_inner());
        }
        if !max_wait.is_zero() {
            let until = Instant::now() + max_wait;
            while state.jobs.len() < max_batch {
                let left = until.saturating_duration_since(Instant::now());
                if left.is_zero() {
                    break;
                }
                state = shared
                    .wake
                    .wait_timeout(state, left)
                    .unwrap_or_else(|e| e.into_inner())
                    .0;
            }
        }
        let now = Instant::now();
        let Take {
            batch: jobs,
            expired,
            abandoned,
        } = take(&mut state, now, max_batch);
        shared.publish(&state, now);
        drop(state);

        if abandoned > 0 {
            metrics.abandoned.inc_by(abandoned as u64);
            tracing::debug!(abandoned, "skipped requests whose caller has gone");
        }
        if !expired.is_empty() {
            shared.shed("expired", expired.len());
            tracing::debug!(
                expired = expired.len(),
                "dropped queued requests that cannot be answered by their deadline"
            );
            for job in expired {
                let _ = job.reply.send(Err(BatchError::Expired));
            }
        }
        if jobs.is_empty() {
            continue;
        }
        metrics.batch_size.observe(jobs.len() as f64);
        let started = Instant::now();
        let inputs: Vec<ClassifyInput> = jobs.iter().map(|j| j.input.clone()).collect();
        let results = match run_isolated(&mut *run, &inputs, metrics) {
            Ok(r) => r.into_iter().map(Ok).collect::<Vec<_>>(),
            // Retry one by one so that one bad input fails only itself.
            Err(_) if jobs.len() > 1 => inputs
                .iter()
                .map(|i| {
                    run_isolated(&mut *run, std::slice::from_ref(i), metrics).and_then(|mut v| {
                        v.pop()
                            .ok_or(BatchError::Engine(EngineFailure::ResultCount {
                                inputs: 1,
                                results: 0,
                            }))
                    })
                })
                .collect(),
            Err(e) => vec![Err(e)],
        };
        let elapsed = started.elapsed();
        {
            let mut state = shared.lock();
            let units = jobs.iter().map(|j| j.units).sum();
            state.backlog.estimate.observe(elapsed, units);
            state.backlog.running = None;
            shared.publish(&state, Instant::now());
        }
        for (job, result) in jobs.into_iter().zip(results) {
            let queued = started.saturating_duration_since(job.enqueued).as_micros() as u64;
            let _ = job.reply.send(result.map(|o| (o, queued)));
        }
    }
}

fn run_isolated(
    run: &mut RunBatch,
    inputs: &[ClassifyInput],
    metrics: &Metrics,
) -> Result<Vec<ClassifyOutput>, BatchError> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| run(inputs))) {
        Ok(Ok(out)) if out.len() == inputs.len() => Ok(out),
        Ok(Ok(out)) => {
            metrics.engine_failures.inc();
            tracing::error!(
                batch = inputs.len(),
                results = out.len(),
                "engine gave a result count unlike its batch"
            );
            Err(BatchError::Engine(EngineFailure::ResultCount {
                inputs: inputs.len(),
                results: out.len(),
            }))
        }
        Ok(Err(e)) => {
            metrics.engine_failures.inc();
            tracing::error!(error = %e, batch = inputs.len(), "engine error");
            Err(BatchError::Engine(EngineFailure::Error(e.to_string())))
        }
        Err(_) => {
            metrics.engine_failures.inc();
            tracing::error!(
                batch = inputs.len(),
                "engine panicked; batch failed, engine continues"
            );
            Err(BatchError::Engine(EngineFailure::Panicked))
        }
    }
}

#[cfg(test)]
mod tests;
