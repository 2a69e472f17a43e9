//! Deadlines and overload, against the real daemon binary and models over its Unix socket:
//! calls the daemon cannot answer by their `grpc-timeout` are refused at once with
//! UNAVAILABLE and never reach the models.
//!
//! The tests here run one at a time (each loads the models and keeps the CPU busy), and
//! assert orders of magnitude (a refusal returns in well under its deadline), not tight
//! timings. Needs `make setup`, like `tests/grpc.rs`.

mod support;

use std::time::{Duration, Instant};

use semroute_proto::v1::classifier_client::ClassifierClient;
use semroute_proto::v1::ClassifyRequest;
use support::{connect, http_get, sample, start_daemon};
use tonic::transport::Channel;

/// One test at a time: a second daemon classifying beside one would skew the other's
/// estimate of its own speed.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

fn metrics(port: u16) -> String {
    http_get(port, "/metrics")
}

/// The value of the sample `series` (name and labels, as exposed); 0 when absent.
fn value(body: &str, series: &str) -> f64 {
    sample(body, series).unwrap_or(0.0)
}

const BATCHES: &str = "semroute_daemon_batch_size_count";
const CALLS_RUN: &str = "semroute_daemon_batch_size_sum";
const ESTIMATE: &str = "semroute_daemon_service_time_estimate_seconds";
const SHED_DEADLINE: &str = r#"semroute_daemon_shed_requests_total{reason="deadline"}"#;
const UNAVAILABLE: &str = r#"semroute_daemon_classify_requests_total{code="unavailable"}"#;

/// A prompt of about `bytes` bytes of business prose, different for each `n` (so that no
/// result cache answers it).
fn prose(n: usize, bytes: usize) -> String {
    let mut s = format!("Request {n}. ");
    let sentences = [
        "Please review the quarterly report prepared by our finance team in Lisbon.",
        "The board wants the main risks summarised before the meeting on Thursday.",
        "Shipping costs rose in the third quarter while the supplier contracts stayed fixed.",
        "Our warehouse in Porto reported fewer late deliveries than in the spring.",
        "The audit found two invoices paid twice and one contract without a signature.",
    ];
    let mut i = n;
    while s.len() < bytes {
        s.push_str(sentences[i % sentences.len()]);
        s.push(' ');
        i = i.wrapping_mul(7).wrapping_add(3);
    }
    s
}

fn request(text: String, timeout: Option<Duration>) -> tonic::Request<ClassifyRequest> {
    let mut r = tonic::Request::new(ClassifyRequest {
        request_id: "overload".into(),
        text: text.into_bytes(),
        ..Default::default()
    });
    if let Some(t) = timeout {
        r.set_timeout(t);
    }
    r
}

/// Two calls without a deadline, so that the daemon has measured its speed.
async fn warm_up(client: &mut ClassifierClient<Channel>, bytes: usize) {
    for n in 0..2 {
        client
            .classify(request(prose(1000 + n, bytes), None))
            .await
            .expect("warm-up call");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_that_cannot_finish_by_its_deadline_is_refused_at_once_and_never_run() {
    let _serial = SERIAL.lock().await;
    let daemon = start_daemon();
    let mut client = ClassifierClient::new(connect(&daemon.socket).await);
    warm_up(&mut client, 1024).await;
    let before = metrics(daemon.metrics_port);
    assert_eq!(value(&before, BATCHES), 2.0, "{before}");
    let per_unit = value(&before, ESTIMATE);
    assert!(per_unit > 0.0, "{before}");

    // A 1 ms deadline: no call can be classified in that time. The daemon refuses it (or,
    // should tonic's timer fire before the handler has read the request, tonic cancels it;
    // the client's own timer can also fire first and report `Cancelled` for a call that the
    // daemon then refuses, so a cancelled call may or may not appear in the daemon's count).
    let mut refused = 0.0;
    let mut cancelled = 0.0;
    for n in 0..5 {
        let err = client
            .classify(request(prose(n, 1024), Some(Duration::from_millis(1))))
            .await
            .expect_err("1 ms is too short for any classification");
        match err.code() {
            tonic::Code::Unavailable => refused += 1.0,
            tonic::Code::Cancelled => cancelled += 1.0,
            code => panic!("unexpected {code:?}: {err:?}"),
        }
    }

    // A long text (256 KiB: seconds of model time on a CPU) with a deadline long enough
    // for no timer race, far shorter than the text costs: refused at once.
    let bytes = 256 * 1024;
    let deadline = Duration::from_millis(100);
    assert!(
        per_unit * (bytes / 1024) as f64 > 4.0 * deadline.as_secs_f64(),
        "the daemon estimates {per_unit} s per KiB: too fast for this test"
    );
    let t = Instant::now();
    let err = client
        .classify(request(prose(99, bytes), Some(deadline)))
        .await
        .expect_err("refused");
    let took = t.elapsed();
    assert_eq!(err.code(), tonic::Code::Unavailable, "{err:?}");
    assert!(
        err.message().contains("deadline"),
        "the refusal names the deadline: {err:?}"
    );
    assert!(
        took < deadline / 2,
        "refused after {took:?}, deadline {deadline:?}"
    );
    refused += 1.0;

    let after = metrics(daemon.metrics_port);
    // None of them reached the models.
    assert_eq!(value(&after, BATCHES), 2.0, "{after}");
    assert_eq!(value(&after, CALLS_RUN), 2.0, "{after}");
    // Every refusal the client saw is counted; a cancelled call at most once.
    for metric in [SHED_DEADLINE, UNAVAILABLE] {
        let counted = value(&after, metric);
        assert!(
            counted >= refused && counted <= refused + cancelled,
            "{metric}: {counted}, refused {refused}, cancelled {cancelled}: {after}"
        );
    }

    // The daemon keeps serving calls it can answer in time.
    client
        .classify(request(prose(7, 1024), Some(Duration::from_secs(30))))
        .await
        .expect("a call with time to spare is answered");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_overloaded_daemon_refuses_at_once_and_answers_what_it_admits_in_time() {
    let _serial = SERIAL.lock().await;
    let daemon = start_daemon();
    let channel = connect(&daemon.socket).await;
    let mut client = ClassifierClient::new(channel.clone());
    // About 500 tokens per call, as the filter sends after compression.
    let bytes = 2500;
    warm_up(&mut client, bytes).await;
    let before = metrics(daemon.metrics_port);
    let per_call = value(&before, ESTIMATE) * (1.0 + bytes as f64 / 1024.0);
    // Time for about six calls by the estimate; far more arrive at once.
    let deadline = Duration::from_secs_f64((6.0 * per_call).max(0.05));
    let calls = 32;
    let tasks: Vec<_> = (0..calls)
        .map(|n| {
            let mut client = ClassifierClient::new(channel.clone());
            tokio::spawn(async move {
                let t = Instant::now();
                let r = client
                    .classify(request(prose(n, bytes), Some(deadline)))
                    .await;
                (r.map(|_| ()).map_err(|e| e.code()), t.elapsed())
            })
        })
        .collect();
    let (mut served, mut refused, mut missed) = (0, 0, 0);
    for task in tasks {
        match task.await.unwrap() {
            (Ok(()), took) => {
                served += 1;
                // Answered within its deadline (the client's clock started a little
                // before the daemon's).
                assert!(took < deadline + deadline / 4, "answered after {took:?}");
            }
            (Err(tonic::Code::Unavailable), took) => {
                refused += 1;
                assert!(
                    took < deadline / 2,
                    "refused after {took:?}, deadline {deadline:?}"
                );
            }
            // Admitted, then late after all (the estimate is an estimate).
            (Err(tonic::Code::Cancelled | tonic::Code::DeadlineExceeded), _) => missed += 1,
            (Err(code), _) => panic!("unexpected {code:?}"),
        }
    }
    let after = metrics(daemon.metrics_port);
    eprintln!("deadline {deadline:?}: {served} served, {refused} refused at once, {missed} missed");
    assert!(served >= 1, "nothing served: {after}");
    assert!(refused >= calls / 4, "only {refused} refused: {after}");
    assert!(
        missed < served,
        "{missed} admitted calls missed their deadline, {served} served"
    );
    assert_eq!(value(&after, SHED_DEADLINE), refused as f64, "{after}");
    // Refused calls never reached the models.
    let run = value(&after, CALLS_RUN) - value(&before, CALLS_RUN);
    assert!(
        run <= (calls - refused) as f64,
        "{run} calls run, {refused} of {calls} refused"
    );
}
