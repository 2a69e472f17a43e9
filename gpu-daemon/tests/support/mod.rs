//! The daemon test harness shared by the integration tests: the real `semroute-daemon`
//! binary started on a temporary Unix socket with the real models, a gRPC channel to it,
//! and its `/metrics`.
//!
//! Needs `make setup` (ONNX Runtime and models under build/); fails with a clear message
//! otherwise.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use tonic::transport::Channel;

pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .unwrap()
        .to_path_buf()
}

/// A running daemon, killed on drop.
pub struct Daemon {
    pub child: Child,
    pub socket: PathBuf,
    pub metrics_port: u16,
    _dir: tempfile::TempDir,
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

pub fn start_daemon() -> Daemon {
    start_daemon_with(&[])
}

/// The ONNX Runtime library the daemon loads: `$ORT_DYLIB_PATH`, else `make setup`'s
/// copy under build/. Panics with a clear message when the models or the library are
/// missing.
pub fn ort_library() -> PathBuf {
    let root = workspace_root();
    let ort = std::env::var_os("ORT_DYLIB_PATH")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("build/onnxruntime/libonnxruntime.so"));
    assert!(
        ort.exists(),
        "ONNX Runtime missing at {}: run `make setup`",
        ort.display()
    );
    assert!(
        root.join("build/models/minilm/model.onnx").exists()
            && root
                .join("build/models/prepared/router/model.onnx")
                .exists(),
        "models missing: run `make setup`"
    );
    ort
}

pub fn start_daemon_with(extra_args: &[&str]) -> Daemon {
    let root = workspace_root();
    let ort = ort_library();
    let dir = tempfile::tempdir().unwrap();
    let socket = dir.path().join("daemon.sock");
    let metrics_port = free_port();
    let child = Command::new(env!("CARGO_BIN_EXE_semroute-daemon"))
        .args(["serve", "--allow-root", "--socket"])
        .arg(&socket)
        .args(["--metrics-addr", &format!("127.0.0.1:{metrics_port}")])
        .args(extra_args)
        .env("ORT_DYLIB_PATH", &ort)
        .current_dir(&root)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn semroute-daemon");
    let mut d = Daemon {
        child,
        socket,
        metrics_port,
        _dir: dir,
    };
    let deadline = Instant::now() + Duration::from_secs(60);
    while !d.socket.exists() {
        if let Ok(Some(status)) = d.child.try_wait() {
            panic!("daemon exited early: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "daemon did not create its socket within 60 s"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    d
}

pub async fn connect(socket: &Path) -> Channel {
    semroute_daemon::client::connect(socket)
        .await
        .expect("connect to daemon socket")
}

pub fn http_get(port: u16, path: &str) -> String {
    use std::io::{Read, Write};
    let mut s = std::net::TcpStream::connect(("127.0.0.1", port)).expect("connect metrics");
    write!(s, "GET {path} HTTP/1.0\r\nHost: localhost\r\n\r\n").unwrap();
    let mut out = String::new();
    s.read_to_string(&mut out).unwrap();
    out
}

/// The value of the sample `series` (name and labels, as exposed) in a `/metrics` body.
pub fn sample(body: &str, series: &str) -> Option<f64> {
    body.lines()
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.trim().parse().ok())
}
