//! Configuration reload without a restart, on the real daemon binary and models: a good
//! configuration switches the models with no failed call while clients keep calling; a
//! bad one keeps the running configuration, logged and counted; a changed config file is
//! picked up without a signal.

mod support;

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use semroute_proto::v1::classifier_client::ClassifierClient;
use semroute_proto::v1::{ClassifyRequest, ClassifyResponse};
use support::{connect, http_get, sample, start_daemon_with};
use tonic::transport::Channel;

/// The served models (config/daemon.toml's defaults).
const ROUTER: &str = "";
/// The generic prepared encoder with its linear heads.
const GENERIC: &str = "[models]\nencoder_dir = \"build/models/prepared/minilm\"\n\
     [models.domain]\nhead = \"models/heads/domain.json\"\n\
     [models.jailbreak]\nhead = \"models/heads/jailbreak.json\"\n";
const BAD: &str = "[limits]\nmax_seq_len = 2\n";

async fn classify(
    client: &mut ClassifierClient<Channel>,
) -> Result<ClassifyResponse, tonic::Status> {
    client
        .classify(ClassifyRequest {
            request_id: "reload".into(),
            text: b"What is the derivative of x^3 with respect to x?".to_vec(),
            signals: vec!["domain".into(), "jailbreak".into(), "pii".into()],
            ..Default::default()
        })
        .await
        .map(|r| r.into_inner())
}

fn domain_model(r: &ClassifyResponse) -> String {
    r.models
        .iter()
        .find(|m| m.signal == "domain")
        .map(|m| m.name.clone())
        .unwrap_or_default()
}

fn hangup(pid: u32) {
    // SAFETY: kill has no memory-safety preconditions.
    let rc = unsafe { libc::kill(pid as i32, libc::SIGHUP) };
    assert_eq!(rc, 0, "SIGHUP");
}

async fn wait_for(what: &str, timeout: Duration, mut done: impl AsyncFnMut() -> bool) {
    let until = Instant::now() + timeout;
    while !done().await {
        assert!(Instant::now() < until, "{what}: not within {timeout:?}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn reload_switches_models_without_failing_a_call_and_keeps_them_on_a_bad_config() {
    let dir = tempfile::tempdir().unwrap();
    let config = dir.path().join("daemon.toml");
    std::fs::write(&config, ROUTER).unwrap();
    let daemon = start_daemon_with(&["--config", config.to_str().unwrap()]);
    let pid = daemon.child.id();
    let channel = connect(&daemon.socket).await;
    let mut client = ClassifierClient::new(channel.clone());
    let router_name = domain_model(&classify(&mut client).await.expect("first call"));

    // Two clients call without pause through every reload below.
    let stop = Arc::new(AtomicBool::new(false));
    let (ok, failed) = (Arc::new(AtomicUsize::new(0)), Arc::new(AtomicUsize::new(0)));
    let mut callers = Vec::new();
    for _ in 0..2 {
        let (stop, ok, failed) = (stop.clone(), ok.clone(), failed.clone());
        let mut client = ClassifierClient::new(channel.clone());
        callers.push(tokio::spawn(async move {
            let mut errors = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                match classify(&mut client).await {
                    Ok(_) => ok.fetch_add(1, Ordering::Relaxed),
                    Err(e) => {
                        errors.push(e.to_string());
                        failed.fetch_add(1, Ordering::Relaxed)
                    }
                };
            }
            errors
        }));
    }
    let reloads = |result: &str| {
        let body = http_get(daemon.metrics_port, "/metrics");
        sample(
            &body,
            &format!("semroute_daemon_config_reloads_total{{result=\"{result}\"}}"),
        )
        .unwrap_or(0.0)
    };

    // A good configuration: the generic encoder and heads answer from some batch on.
    std::fs::write(&config, GENERIC).unwrap();
    hangup(pid);
    let mut probe = ClassifierClient::new(channel.clone());
    wait_for(
        "the new models answering",
        Duration::from_secs(60),
        async || {
            classify(&mut probe)
                .await
                .is_ok_and(|r| domain_model(&r) != router_name)
        },
    )
    .await;
    let generic_name = domain_model(&classify(&mut probe).await.unwrap());
    assert!(generic_name.contains("domain"), "{generic_name}");
    assert!(reloads("ok") >= 1.0);

    // A bad configuration: counted, and the running models keep answering.
    std::fs::write(&config, BAD).unwrap();
    hangup(pid);
    wait_for(
        "the failed reload counted",
        Duration::from_secs(30),
        async || reloads("error") >= 1.0,
    )
    .await;
    let r = classify(&mut probe).await.expect("still serving");
    assert_eq!(domain_model(&r), generic_name);

    // The file changed again, no signal: picked up by the watch.
    std::fs::write(&config, ROUTER).unwrap();
    wait_for(
        "the file change picked up",
        Duration::from_secs(60),
        async || {
            classify(&mut probe)
                .await
                .is_ok_and(|r| domain_model(&r) == router_name)
        },
    )
    .await;

    stop.store(true, Ordering::Relaxed);
    let mut errors = Vec::new();
    for c in callers {
        errors.extend(c.await.unwrap());
    }
    assert!(ok.load(Ordering::Relaxed) > 0, "the clients made no call");
    assert_eq!(
        failed.load(Ordering::Relaxed),
        0,
        "failed calls: {errors:?}"
    );
    assert!(
        daemon.socket.exists(),
        "the daemon must still be serving on its socket"
    );
}
