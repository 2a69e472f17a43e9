//! `semroute-daemon classify` as a command-line filter, with the real models: one JSON
//! result per input line, and a quiet, successful end when the reader closes the output
//! early (`semroute-daemon classify < texts.jsonl | head`).
//!
//! Needs `make setup` (ONNX Runtime and models under build/); fails with a clear message
//! otherwise.

mod support;

use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

/// `semroute-daemon classify` on the default configuration, run from the workspace root
/// (the configuration's model paths are relative to it), stdin, stdout and stderr piped.
fn classify_command(signals: &str) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_semroute-daemon"));
    cmd.current_dir(support::workspace_root())
        .args([
            "classify",
            "--config",
            "config/daemon.toml",
            "--signals",
            signals,
        ])
        .env("ORT_DYLIB_PATH", support::ort_library())
        .env_remove("RUST_BACKTRACE")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    cmd
}

/// `n` JSON input lines, each a different ordinary request.
fn input_lines(n: usize) -> String {
    (0..n)
        .map(|i| {
            let text = format!("Question {i}: how does a binary search tree keep its keys sorted?");
            format!("{}\n", serde_json::json!({ "text": text }))
        })
        .collect()
}

#[test]
fn classify_answers_each_line_with_one_json_result() {
    let mut child = classify_command("domain")
        .spawn()
        .expect("starting the daemon");
    let mut stdin = child.stdin.take().expect("stdin piped");
    stdin
        .write_all(input_lines(3).as_bytes())
        .expect("writing the input");
    drop(stdin);
    let out = child.wait_with_output().expect("waiting for the daemon");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}, stderr:\n{stderr}",
        out.status
    );
    let lines: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON result per line"))
        .collect();
    assert_eq!(lines.len(), 3);
    for v in &lines {
        let label = v
            .pointer("/domain/distribution/0/label")
            .and_then(|l| l.as_str());
        assert!(
            label.is_some_and(|l| !l.is_empty()),
            "no domain label in {v}"
        );
    }
}

#[test]
fn classify_ends_quietly_when_the_reader_closes_the_output() {
    // More results than a pipe holds, so that the daemon is still writing when the reader
    // is gone: the write fails with EPIPE (Rust ignores SIGPIPE).
    let n = 400;
    let mut child = classify_command("domain")
        .spawn()
        .expect("starting the daemon");
    let mut stdin = child.stdin.take().expect("stdin piped");
    let feeder = std::thread::spawn(move || {
        // The daemon may stop reading once its output is closed: a failed write ends this.
        let _ = stdin.write_all(input_lines(n).as_bytes());
    });
    let mut stdout = BufReader::new(child.stdout.take().expect("stdout piped"));
    let mut first = String::new();
    stdout
        .read_line(&mut first)
        .expect("reading the first result");
    serde_json::from_str::<serde_json::Value>(&first).expect("the first result is JSON");
    drop(stdout);
    let out = child.wait_with_output().expect("waiting for the daemon");
    feeder.join().expect("the input writer");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "exit {:?}, stderr:\n{stderr}",
        out.status
    );
    assert!(
        !stderr.contains("Broken pipe") && !stderr.contains("Error:"),
        "stderr:\n{stderr}"
    );
}
