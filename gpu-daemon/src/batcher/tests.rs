use super::*;

const MS: Duration = Duration::from_millis(1);

/// An estimate seeded at `per_unit_ms`, with a floor so high that the first
/// measurement sets the fastest speed.
fn estimate(per_unit_ms: u64) -> ServiceEstimate {
    ServiceEstimate::seeded(MS * per_unit_ms as u32, Duration::from_secs(1000))
}

/// An estimate measured once at `per_unit_ms` (deviation: half of it).
fn measured(per_unit_ms: u64) -> ServiceEstimate {
    let mut e = estimate(1000);
    e.observe(MS * per_unit_ms as u32 * 10, 10.0);
    e
}

#[test]
fn work_units_grow_with_the_text() {
    let mut input = ClassifyInput::default();
    assert_eq!(work_units(&input), 1.0);
    input.text = "a".repeat(2048);
    assert_eq!(work_units(&input), 3.0);
    input.scan_text = "b".repeat(512);
    assert_eq!(work_units(&input), 3.5);
}

#[test]
fn the_first_measurement_replaces_the_seed_and_later_ones_are_smoothed() {
    let mut e = ServiceEstimate::seeded(SEED_PER_UNIT, SEED_FASTEST_PER_UNIT);
    assert_eq!(e.samples(), 0);
    assert!((e.planned() - 0.1).abs() < 1e-12);
    // 4 units in 80 ms: 20 ms per unit, 10 ms of deviation.
    e.observe(MS * 80, 4.0);
    assert!((e.mean() - 0.020).abs() < 1e-12);
    assert!((e.planned() - 0.030).abs() < 1e-12);
    // 36 ms per unit: the deviation moves by a quarter of (16 - 10) ms, the mean by an
    // eighth of 16 ms.
    e.observe(MS * 36, 1.0);
    assert!((e.mean() - 0.022).abs() < 1e-12, "{e:?}");
    assert!((e.deviation - 0.0115).abs() < 1e-12, "{e:?}");
    // The seed's floor stays: nothing measured was faster.
    assert_eq!(e.fastest, SEED_FASTEST_PER_UNIT.as_secs_f64(), "{e:?}");
    e.observe(MS, 1.0);
    assert!((e.fastest - 0.001).abs() < 1e-12, "{e:?}");
    e.observe(MS * 22, 1.0);
    // Steady samples shrink the deviation toward zero.
    for _ in 0..100 {
        e.observe(MS * 22, 1.0);
    }
    assert!((e.mean() - 0.022).abs() < 1e-4, "{e:?}");
    assert!(e.deviation < 1e-6, "{e:?}");
    // A batch of no units teaches nothing.
    let before = e.clone();
    e.observe(MS * 500, 0.0);
    assert_eq!(e, before);
}

#[test]
fn admission_counts_the_work_ahead_then_the_call_itself() {
    let now = Instant::now();
    // 15 ms per unit planned (10 mean + 5 deviation), nothing ahead.
    let mut b = Backlog::new(measured(10));
    assert_eq!(b.ahead(now), Duration::ZERO);
    // 3 units: 45 ms.
    assert_eq!(
        b.admit(now, 3.0, Some(now + MS * 45)),
        Ok(Admitted::Planned)
    );
    assert_eq!(b.admit(now, 3.0, None), Ok(Admitted::Planned));
    // 5 queued units (75 ms) and a batch of 4 units (60 ms) running for 30 ms.
    b.queued = 2;
    b.queued_units = 5.0;
    b.running = Some((now - MS * 30, 4.0));
    assert_eq!(b.ahead(now), MS * 105);
    assert_eq!(
        b.admit(now, 3.0, Some(now + MS * 150)),
        Ok(Admitted::Planned)
    );
    assert_eq!(b.admit(now, 3.0, Some(now + MS * 149)), Err(MS * 150));
    // No deadline: admitted whatever is ahead.
    assert_eq!(b.admit(now, 3.0, None), Ok(Admitted::Planned));
    // A batch running past its estimate adds nothing more.
    b.running = Some((now - MS * 500, 4.0));
    assert_eq!(b.ahead(now), MS * 75);
}

#[test]
fn an_idle_engine_probes_with_a_call_that_could_finish_at_the_fastest_speed_seen() {
    let now = Instant::now();
    // Mean 100 ms per unit, fastest 10 ms: a slow spell since the first batch.
    let mut e = measured(10);
    for _ in 0..40 {
        e.observe(MS * 100, 1.0);
    }
    assert!(e.planned() > 0.099, "{e:?}");
    let mut b = Backlog::new(e);
    // 2 units: 200 ms by the estimate, 20 ms at the fastest speed.
    assert_eq!(b.admit(now, 2.0, Some(now + MS * 50)), Ok(Admitted::Probe));
    // Not even at the fastest speed.
    assert!(b.admit(now, 2.0, Some(now + MS * 19)).is_err());
    // Not when busy: the queue or the engine.
    b.queued = 1;
    b.queued_units = 0.1;
    assert!(b.admit(now, 2.0, Some(now + MS * 50)).is_err());
    b.queued = 0;
    b.queued_units = 0.0;
    b.running = Some((now, 0.1));
    assert!(b.admit(now, 2.0, Some(now + MS * 50)).is_err());
    // A deadline already past is never admitted.
    let fresh = Backlog::new(estimate(10));
    assert!(fresh.admit(now, 1.0, Some(now)).is_err());
    // A first batch slowed by a cold start (2 s per unit) leaves the seeded floor: an
    // idle engine still runs a 500-token call with a 1 s deadline, not 1 ms.
    let mut cold = ServiceEstimate::seeded(SEED_PER_UNIT, SEED_FASTEST_PER_UNIT);
    cold.observe(Duration::from_secs(2), 1.0);
    let b = Backlog::new(cold);
    assert_eq!(
        b.admit(now, 3.5, Some(now + Duration::from_secs(1))),
        Ok(Admitted::Probe)
    );
    assert!(b.admit(now, 3.5, Some(now + MS)).is_err());
}

fn job(units: f64, deadline: Option<Instant>) -> (Job, oneshot::Receiver<JobResult>) {
    let (reply, rx) = oneshot::channel();
    let job = Job {
        input: ClassifyInput::default(),
        units,
        enqueued: Instant::now(),
        deadline,
        admitted: Admitted::Planned,
        reply,
    };
    (job, rx)
}

fn state(jobs: Vec<Job>, mean_ms: u64) -> State {
    let mut e = estimate(1000);
    e.observe(MS * mean_ms as u32, 1.0);
    let mut backlog = Backlog::new(e);
    backlog.queued = jobs.len();
    backlog.queued_units = jobs.iter().map(|j| j.units).sum();
    State {
        jobs: jobs.into(),
        backlog,
        closed: false,
    }
}

#[test]
fn taking_a_batch_drops_gone_callers_and_hopeless_jobs_and_stops_before_a_deadline() {
    let now = Instant::now();
    // 10 ms per unit (mean).
    let (gone, rx_gone) = job(1.0, None);
    drop(rx_gone);
    let (past, _rx_past) = job(1.0, Some(now - MS));
    let (too_big, _rx_big) = job(5.0, Some(now + MS * 40));
    let (a, _rx_a) = job(2.0, Some(now + MS * 100));
    let (b, _rx_b) = job(3.0, None);
    // With a and b ahead, 2 + 3 + 4 = 9 units = 90 ms: past a's deadline? No (100 ms).
    let (c, _rx_c) = job(4.0, Some(now + MS * 200));
    // 9 + 2 = 11 units = 110 ms: past a's 100 ms, so d waits for the next batch.
    let (d, _rx_d) = job(2.0, None);
    let (e, _rx_e) = job(1.0, None);
    let mut s = state(vec![gone, past, too_big, a, b, c, d, e], 10);
    let t = take(&mut s, now, 8);
    assert_eq!(t.abandoned, 1);
    assert_eq!(t.expired.len(), 2);
    assert_eq!(
        t.batch.iter().map(|j| j.units).collect::<Vec<_>>(),
        [2.0, 3.0, 4.0]
    );
    assert_eq!(s.jobs.len(), 2);
    assert_eq!(s.backlog.queued, 2);
    assert_eq!(s.backlog.queued_units, 3.0);
    assert_eq!(s.backlog.running, Some((now, 9.0)));
    // The rest fit one batch; max_batch bounds it.
    let t = take(&mut s, now, 1);
    assert_eq!(t.batch.len(), 1);
    assert_eq!(s.backlog.queued, 1);
    let t = take(&mut s, now, 8);
    assert_eq!(t.batch.len(), 1);
    assert_eq!(s.backlog.running, Some((now, 1.0)));
    let t = take(&mut s, now, 8);
    assert!(t.batch.is_empty());
    assert_eq!(s.backlog.running, None);
    assert_eq!(s.backlog.queued_units, 0.0);
}

#[test]
fn a_job_alone_is_taken_even_when_the_batch_rule_would_stop_it() {
    let now = Instant::now();
    // 10 ms per unit: 5 units need 50 ms, the deadline is in 60 ms.
    let (a, _rx_a) = job(5.0, Some(now + MS * 60));
    let (b, _rx_b) = job(5.0, Some(now + MS * 200));
    let mut s = state(vec![a, b], 10);
    let t = take(&mut s, now, 8);
    assert_eq!(t.batch.len(), 1, "b would make a late");
    let t = take(&mut s, now, 8);
    assert_eq!(t.batch.len(), 1);
}

#[test]
fn a_probe_is_dropped_only_once_its_deadline_has_passed() {
    let now = Instant::now();
    let (mut p, _rx) = job(5.0, Some(now + MS * 10));
    p.admitted = Admitted::Probe;
    assert!(!p.hopeless(now, 0.010));
    assert!(p.hopeless(now + MS * 10, 0.010));
    p.admitted = Admitted::Planned;
    assert!(p.hopeless(now, 0.010));
}

fn config(max_batch: usize, queue_capacity: usize) -> BatchingConfig {
    BatchingConfig {
        max_batch,
        queue_capacity,
        ..BatchingConfig::default()
    }
}

/// A fake engine that sleeps `per_call` per input and counts the inputs it ran.
fn sleepy(per_call: Duration, ran: Arc<std::sync::atomic::AtomicUsize>) -> Box<RunBatch> {
    Box::new(move |inputs: &[ClassifyInput]| {
        std::thread::sleep(per_call * inputs.len() as u32);
        ran.fetch_add(inputs.len(), Ordering::SeqCst);
        Ok(inputs.iter().map(|_| ClassifyOutput::default()).collect())
    })
}

fn shed(metrics: &Metrics, reason: &str) -> u64 {
    metrics
        .shed
        .get_or_create(&ShedLabel {
            reason: reason.into(),
        })
        .get()
}

#[tokio::test]
async fn a_job_whose_deadline_passes_in_the_queue_is_never_run() {
    let metrics = Metrics::new();
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    // The estimate says 1 ms per unit; the engine takes 300 ms per call.
    let b = Batcher::start_with(
        sleepy(MS * 300, ran.clone()),
        &config(1, 16),
        ServiceEstimate::seeded(MS, MS),
        metrics.clone(),
    );
    let first = tokio::spawn({
        let b = b.clone();
        async move { b.classify(ClassifyInput::default(), None).await }
    });
    tokio::time::sleep(MS * 50).await;
    // Admitted (1 ms ahead by the estimate), expired when the engine reaches it.
    let late = b
        .classify(ClassifyInput::default(), Some(Instant::now() + MS * 100))
        .await;
    assert_eq!(late.unwrap_err(), BatchError::Expired);
    assert!(first.await.unwrap().is_ok());
    assert_eq!(ran.load(Ordering::SeqCst), 1);
    assert_eq!(shed(&metrics, "expired"), 1);
    assert_eq!(shed(&metrics, "deadline"), 0);
    // The engine measured itself: about 300 ms per unit now.
    assert!(metrics.service_time_estimate.get() > 0.1);
}

#[tokio::test]
async fn an_overloaded_batcher_refuses_at_once_what_it_cannot_finish_in_time() {
    let metrics = Metrics::new();
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let b = Batcher::start_with(
        sleepy(MS * 40, ran.clone()),
        &config(1, 64),
        ServiceEstimate::seeded(MS * 40, MS),
        metrics.clone(),
    );
    // Measure: one call.
    b.classify(ClassifyInput::default(), None).await.unwrap();
    let deadline = MS * 400;
    let calls: Vec<_> = (0..30)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move {
                let t = Instant::now();
                let r = b
                    .classify(ClassifyInput::default(), Some(t + deadline))
                    .await;
                (r.map(|_| ()), t.elapsed())
            })
        })
        .collect();
    let mut served = 0;
    let mut refused = 0;
    for c in calls {
        match c.await.unwrap() {
            (Ok(()), took) => {
                served += 1;
                assert!(took < deadline * 2, "{took:?}");
            }
            (Err(BatchError::WouldMissDeadline { .. }), took) => {
                refused += 1;
                assert!(took < deadline / 2, "refused after {took:?}");
            }
            (Err(e), _) => panic!("unexpected {e:?}"),
        }
    }
    assert!(
        served >= 1 && refused >= 1,
        "{served} served, {refused} refused"
    );
    assert_eq!(shed(&metrics, "deadline"), refused);
    assert_eq!(ran.load(Ordering::SeqCst), 1 + served as usize);
}

#[tokio::test]
async fn without_admission_every_call_is_queued_and_run_whatever_its_deadline() {
    let metrics = Metrics::new();
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let b = Batcher::start_with(
        sleepy(MS * 40, ran.clone()),
        &BatchingConfig {
            admission: false,
            ..config(1, 64)
        },
        ServiceEstimate::seeded(MS * 40, MS),
        metrics.clone(),
    );
    // 10 calls of 40 ms each with a 100 ms deadline: with admission most would be
    // refused or expire; without it all run, late or not.
    let calls: Vec<_> = (0..10)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move {
                b.classify(ClassifyInput::default(), Some(Instant::now() + MS * 100))
                    .await
            })
        })
        .collect();
    for c in calls {
        assert!(c.await.unwrap().is_ok());
    }
    assert_eq!(ran.load(Ordering::SeqCst), 10);
    for reason in ["deadline", "expired", "queue_full"] {
        assert_eq!(shed(&metrics, reason), 0, "{reason}");
    }
    // A caller that has gone is still skipped.
    let busy = tokio::spawn({
        let b = b.clone();
        async move { b.classify(ClassifyInput::default(), None).await }
    });
    tokio::time::sleep(MS * 10).await;
    // Polled once (queued), then dropped.
    let gone =
        tokio::time::timeout(Duration::ZERO, b.classify(ClassifyInput::default(), None)).await;
    assert!(gone.is_err());
    assert!(busy.await.unwrap().is_ok());
    // Queued behind the gone call: the engine skips that one on its way here.
    b.classify(ClassifyInput::default(), None).await.unwrap();
    assert_eq!(metrics.abandoned.get(), 1);
    assert_eq!(ran.load(Ordering::SeqCst), 12);
}

#[tokio::test]
async fn a_full_queue_refuses_and_calls_without_deadline_wait() {
    let metrics = Metrics::new();
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let b = Batcher::start_with(
        sleepy(MS * 30, ran.clone()),
        &config(1, 2),
        ServiceEstimate::seeded(MS, MS),
        metrics.clone(),
    );
    let calls: Vec<_> = (0..8)
        .map(|_| {
            let b = b.clone();
            tokio::spawn(async move { b.classify(ClassifyInput::default(), None).await })
        })
        .collect();
    let mut full = 0;
    for c in calls {
        match c.await.unwrap() {
            Ok(_) => {}
            Err(BatchError::QueueFull(2)) => full += 1,
            Err(e) => panic!("unexpected {e:?}"),
        }
    }
    assert!(full >= 1);
    assert_eq!(shed(&metrics, "queue_full"), full);
    assert_eq!(ran.load(Ordering::SeqCst), 8 - full as usize);
}

#[tokio::test]
async fn a_failing_input_fails_only_itself() {
    let metrics = Metrics::new();
    let run: Box<RunBatch> = Box::new(|inputs: &[ClassifyInput]| {
        if inputs.iter().any(|i| i.text == "bad") {
            panic!("bad input");
        }
        Ok(inputs.iter().map(|_| ClassifyOutput::default()).collect())
    });
    let b = Batcher::start_with(
        run,
        &config(8, 16),
        ServiceEstimate::seeded(MS, MS),
        metrics.clone(),
    );
    let bad = ClassifyInput {
        text: "bad".into(),
        ..Default::default()
    };
    assert!(matches!(
        b.classify(bad, None).await,
        Err(BatchError::Engine(_))
    ));
    assert!(b.classify(ClassifyInput::default(), None).await.is_ok());
    assert_eq!(metrics.engine_failures.get(), 1);
}

#[test]
fn the_engine_thread_ends_when_every_handle_is_gone() {
    let metrics = Metrics::new();
    let ran = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let b = Batcher::start_with(
        sleepy(MS, ran),
        &config(1, 4),
        ServiceEstimate::seeded(MS, MS),
        metrics,
    );
    let shared = b.shared.clone();
    drop(b);
    let until = Instant::now() + Duration::from_secs(10);
    while shared.engine_alive.load(Ordering::SeqCst) {
        assert!(Instant::now() < until, "engine thread still running");
        std::thread::sleep(MS);
    }
}
