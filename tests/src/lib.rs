//! End-to-end harness: starts the real router (Envoy with the semroute wasm
//! filter, the inference daemon and one `semroute-upstream` per model
//! cluster) on free ports with a private socket directory, and stops every
//! child process on drop.
//!
//! The Envoy configuration is derived from the repository's `envoy.yaml` (the
//! single source of truth) by substituting the listener and admin ports, the
//! upstream ports, the daemon socket path, the wasm path and, optionally, the
//! filter configuration.
//!
//! Artifacts and where they are looked for (environment overrides first):
//!
//! | artifact | variable | default |
//! |---|---|---|
//! | Envoy | `SEMROUTE_ENVOY` | `$SEMROUTE_BUILD_DIR/envoy/envoy` |
//! | build dir | `SEMROUTE_BUILD_DIR` | `<workspace>/build` |
//! | filter | `SEMROUTE_WASM` | `<target>/wasm32-wasip1/release/semroute_filter.wasm` |
//! | daemon | `SEMROUTE_DAEMON_BIN` | `<target>/release/semroute-daemon`, else `<target>/debug/...` |
//! | ONNX Runtime | `ORT_DYLIB_PATH` | `$SEMROUTE_BUILD_DIR/onnxruntime/libonnxruntime.so` |
//! | evaluation data | `SEMROUTE_EVAL_DIR` | `<workspace>/../shared/eval` |
//!
//! `<target>` is `$CARGO_TARGET_DIR` or `<workspace>/target`. A missing
//! artifact is an error that says how to build it, never a skipped test.

use std::fs;
use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// The workspace root (parent of this crate).
pub fn workspace_root() -> PathBuf {
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    here.parent().map_or(here.clone(), Path::to_path_buf)
}

fn env_path(var: &str) -> Option<PathBuf> {
    std::env::var_os(var)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The build directory (`SEMROUTE_BUILD_DIR`, default `<workspace>/build`).
pub fn build_dir() -> PathBuf {
    env_path("SEMROUTE_BUILD_DIR").unwrap_or_else(|| workspace_root().join("build"))
}

/// Cargo's target directory.
pub fn target_dir() -> PathBuf {
    match env_path("CARGO_TARGET_DIR") {
        Some(p) if p.is_absolute() => p,
        Some(p) => workspace_root().join(p),
        None => workspace_root().join("target"),
    }
}

/// The evaluation data directory (`SEMROUTE_EVAL_DIR`, default
/// `<workspace>/../shared/eval`).
pub fn eval_dir() -> PathBuf {
    env_path("SEMROUTE_EVAL_DIR").unwrap_or_else(|| workspace_root().join("../shared/eval"))
}

fn require(path: PathBuf, what: &str) -> Result<PathBuf, String> {
    if path.is_file() {
        Ok(path)
    } else {
        Err(format!(
            "{what} not found at {}: run make setup / make build",
            path.display()
        ))
    }
}

/// Path of the Envoy binary, or an error naming the make targets.
pub fn envoy_bin() -> Result<PathBuf, String> {
    require(
        env_path("SEMROUTE_ENVOY").unwrap_or_else(|| build_dir().join("envoy/envoy")),
        "Envoy",
    )
}

/// Newest modification time of the files under `dir` (recursively), leaving out the
/// entries named in `skip` at any depth.
fn newest_mtime(dir: &Path, skip: &[&str]) -> Option<std::time::SystemTime> {
    let mut newest = None;
    for entry in fs::read_dir(dir).ok()?.flatten() {
        if skip.iter().any(|s| entry.file_name() == *s) {
            continue;
        }
        let path = entry.path();
        let t = if path.is_dir() {
            newest_mtime(&path, skip)
        } else {
            entry.metadata().ok().and_then(|m| m.modified().ok())
        };
        newest = newest.max(t);
    }
    newest
}

/// Path of the filter's wasm module; an error when it is missing or older
/// than the filter's sources (a stale build would test old code).
pub fn wasm_path() -> Result<PathBuf, String> {
    let path = wasm_module()?;
    if env_path("SEMROUTE_WASM").is_none() {
        let built = fs::metadata(&path).and_then(|m| m.modified()).ok();
        // `testing` (the mock host and recorder) and the unit tests (`tests.rs`, `tests/`)
        // are never part of the module.
        let sources = newest_mtime(
            &workspace_root().join("filter-wasm/src"),
            &["testing", "tests.rs", "tests"],
        );
        if let (Some(built), Some(sources)) = (built, sources) {
            if sources > built {
                return Err(format!(
                    "{} is older than filter-wasm/src: run make build",
                    path.display()
                ));
            }
        }
    }
    Ok(path)
}

fn wasm_module() -> Result<PathBuf, String> {
    require(
        env_path("SEMROUTE_WASM")
            .unwrap_or_else(|| target_dir().join("wasm32-wasip1/release/semroute_filter.wasm")),
        "the semroute filter (wasm32-wasip1, release)",
    )
}

/// Path of the daemon binary (release preferred).
pub fn daemon_bin() -> Result<PathBuf, String> {
    if let Some(p) = env_path("SEMROUTE_DAEMON_BIN") {
        return require(p, "semroute-daemon");
    }
    let release = target_dir().join("release/semroute-daemon");
    if release.is_file() {
        return Ok(release);
    }
    require(
        target_dir().join("debug/semroute-daemon"),
        "semroute-daemon",
    )
}

/// Path of the ONNX Runtime shared library.
pub fn ort_lib() -> Result<PathBuf, String> {
    require(
        env_path("ORT_DYLIB_PATH")
            .unwrap_or_else(|| build_dir().join("onnxruntime/libonnxruntime.so")),
        "ONNX Runtime",
    )
}

/// A free TCP port on 127.0.0.1 (bound once and released).
pub fn free_port() -> u16 {
    free_ports(1)[0]
}

/// `n` distinct free TCP ports on 127.0.0.1: all are held until the last is bound, then
/// released. Ports bound and released one at a time may repeat (the kernel may hand out
/// a released port again), and two components told to bind the same port would leave one
/// of them answering for both.
pub fn free_ports(n: usize) -> Vec<u16> {
    let listeners: Vec<TcpListener> = (0..n)
        .map(|_| TcpListener::bind("127.0.0.1:0").unwrap_or_else(|e| panic!("no free port: {e}")))
        .collect();
    listeners
        .iter()
        .map(|l| {
            l.local_addr()
                .map(|a| a.port())
                .unwrap_or_else(|e| panic!("no free port: {e}"))
        })
        .collect()
}

/// A child process that is killed (and reaped) on drop.
pub struct ChildGuard {
    name: String,
    child: Option<Child>,
    log: PathBuf,
}

/// Bytes of a child's output kept from its start in [`ChildGuard::log_excerpt`].
const LOG_HEAD_BYTES: usize = 1024;

impl ChildGuard {
    /// Spawns `cmd` with stdout and stderr to `log`.
    pub fn spawn(name: &str, mut cmd: Command, log: PathBuf) -> Result<Self, String> {
        let out = fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
        let err = out.try_clone().map_err(|e| e.to_string())?;
        let child = cmd
            .stdin(Stdio::null())
            .stdout(Stdio::from(out))
            .stderr(Stdio::from(err))
            .spawn()
            .map_err(|e| format!("cannot start {name}: {e}"))?;
        Ok(ChildGuard {
            name: name.to_string(),
            child: Some(child),
            log,
        })
    }

    /// Name given at spawn.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The process id.
    pub fn id(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The exit status when the process has ended.
    pub fn exited(&mut self) -> Option<std::process::ExitStatus> {
        self.child
            .as_mut()
            .and_then(|c| c.try_wait().ok().flatten())
    }

    /// Kills the process and waits for it.
    pub fn stop(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
    }

    /// The process's output for an error message: its last `bytes`, and when
    /// that cuts the output, its first [`LOG_HEAD_BYTES`] too. The head is kept
    /// because a process that fails at start prints its error first (an
    /// `anyhow` error's message comes before its backtrace).
    pub fn log_excerpt(&self, bytes: usize) -> String {
        let text = fs::read(&self.log).unwrap_or_default();
        let tail = text.len().saturating_sub(bytes);
        if tail <= LOG_HEAD_BYTES {
            return String::from_utf8_lossy(&text).into_owned();
        }
        format!(
            "{}\n[... {} bytes ...]\n{}",
            String::from_utf8_lossy(&text[..LOG_HEAD_BYTES]),
            tail - LOG_HEAD_BYTES,
            String::from_utf8_lossy(&text[tail..])
        )
    }
}

impl Drop for ChildGuard {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The `model` of a `semroute-upstream` `/stats` body.
fn upstream_model(stats: &str) -> Option<String> {
    let v: Value = serde_json::from_str(stats).ok()?;
    v.get("model")?.as_str().map(str::to_string)
}

/// Minimal blocking HTTP/1.1 GET on 127.0.0.1; `None` when unreachable.
pub fn http_get(port: u16, path: &str) -> Option<(u16, String)> {
    let mut s =
        TcpStream::connect_timeout(&([127, 0, 0, 1], port).into(), Duration::from_millis(500))
            .ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut buf = Vec::new();
    s.read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf).into_owned();
    let status = text.split_whitespace().nth(1)?.parse().ok()?;
    let body = text
        .split_once("\r\n\r\n")
        .map(|(_, b)| b.to_string())
        .unwrap_or_default();
    Some((status, body))
}

/// Polls `ready` every 50 ms until it holds or `timeout` passes.
pub fn wait_until(timeout: Duration, mut ready: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    while Instant::now() < deadline {
        if ready() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    ready()
}

/// The local upstream clusters of `envoy.yaml`: (cluster name = model, port).
pub fn upstream_clusters(envoy_yaml: &str) -> Vec<(String, u16)> {
    let mut out = Vec::new();
    let mut in_clusters = false;
    let mut name: Option<String> = None;
    for line in envoy_yaml.lines() {
        let t = line.trim();
        if t.starts_with("clusters:") {
            in_clusters = true;
            continue;
        }
        if !in_clusters {
            continue;
        }
        if let Some(n) = t.strip_prefix("- name:") {
            name = Some(n.trim().to_string());
        }
        if let (Some(i), Some(n)) = (t.find("port_value:"), name.as_ref()) {
            let digits: String = t[i + "port_value:".len()..]
                .trim()
                .chars()
                .take_while(char::is_ascii_digit)
                .collect();
            if let Ok(p) = digits.parse() {
                out.push((n.clone(), p));
            }
        }
    }
    out
}

/// The filter configuration embedded in `envoy.yaml` (the JSON block under
/// `configuration: ... value: |`), with its line range and indentation.
fn filter_config_block(yaml: &str) -> Result<(usize, usize, String, Value), String> {
    let lines: Vec<&str> = yaml.lines().collect();
    let at = lines
        .iter()
        .position(|l| l.contains("type.googleapis.com/google.protobuf.StringValue"))
        .ok_or("envoy.yaml: no StringValue filter configuration")?;
    let value_line = at + 1;
    if lines.get(value_line).is_none_or(|l| l.trim() != "value: |") {
        return Err("envoy.yaml: expected `value: |` after the StringValue type".into());
    }
    let first = value_line + 1;
    let indent: String = lines
        .get(first)
        .ok_or("envoy.yaml: empty filter configuration")?
        .chars()
        .take_while(|c| *c == ' ')
        .collect();
    let mut end = first;
    while end < lines.len() && (lines[end].starts_with(&indent) || lines[end].trim().is_empty()) {
        end += 1;
    }
    let json: String = lines[first..end]
        .iter()
        .map(|l| l.trim_start())
        .collect::<Vec<_>>()
        .join("\n");
    let value = serde_json::from_str(&json)
        .map_err(|e| format!("envoy.yaml: filter configuration is not JSON: {e}"))?;
    Ok((first, end, indent, value))
}

/// The default filter configuration from `envoy.yaml`.
pub fn default_filter_config() -> Result<Value, String> {
    let yaml = read_envoy_yaml()?;
    Ok(filter_config_block(&yaml)?.3)
}

fn read_envoy_yaml() -> Result<String, String> {
    let path = workspace_root().join("envoy.yaml");
    fs::read_to_string(&path).map_err(|e| format!("{}: {e}", path.display()))
}

fn replace_once(text: &str, from: &str, to: &str) -> Result<String, String> {
    match text.matches(from).count() {
        1 => Ok(text.replacen(from, to, 1)),
        n => Err(format!(
            "envoy.yaml: expected `{from}` exactly once, found {n} times"
        )),
    }
}

/// Ports and paths of one running router.
#[derive(Debug, Clone)]
pub struct Layout {
    /// Envoy listener port.
    pub port: u16,
    /// Envoy admin port.
    pub admin_port: u16,
    /// Daemon socket path.
    pub socket: PathBuf,
    /// Model name -> upstream port.
    pub upstreams: Vec<(String, u16)>,
    /// Port of the daemon's Prometheus `/metrics` (127.0.0.1), when a
    /// daemon is started by the harness.
    pub daemon_metrics_port: Option<u16>,
}

/// Renders `envoy.yaml` for `layout`, with `filter_config` replacing the
/// embedded filter configuration when given.
pub fn render_envoy_config(
    layout: &Layout,
    wasm: &Path,
    filter_config: Option<&Value>,
) -> Result<String, String> {
    let yaml = read_envoy_yaml()?;
    let (first, end, indent, default) = filter_config_block(&yaml)?;
    let config = filter_config.unwrap_or(&default);
    let pretty = serde_json::to_string_pretty(config).map_err(|e| e.to_string())?;
    let mut lines: Vec<String> = yaml.lines().map(str::to_string).collect();
    let block: Vec<String> = pretty.lines().map(|l| format!("{indent}{l}")).collect();
    lines.splice(first..end, block);
    let mut text = lines.join("\n");
    text.push('\n');
    text = replace_once(
        &text,
        "port_value: 10000",
        &format!("port_value: {}", layout.port),
    )?;
    text = replace_once(
        &text,
        "port_value: 9901",
        &format!("port_value: {}", layout.admin_port),
    )?;
    text = replace_once(
        &text,
        "path: /tmp/semroute/daemon.sock",
        &format!("path: {}", layout.socket.display()),
    )?;
    text = replace_once(
        &text,
        "filename: target/wasm32-wasip1/release/semroute_filter.wasm",
        &format!("filename: {}", wasm.display()),
    )?;
    for ((name, default_port), (_, port)) in upstream_clusters(&yaml).iter().zip(&layout.upstreams)
    {
        let from = format!("port_value: {default_port} ");
        let to = format!("port_value: {port} ");
        text = replace_once(&text, &from, &to).map_err(|e| format!("{e} (cluster {name})"))?;
    }
    Ok(text)
}

/// Removes the semroute wasm filter (the `envoy.filters.http.wasm` entry of
/// `http_filters`, up to the next filter) from a rendered configuration,
/// leaving listener, routes and clusters as they are.
pub fn without_wasm_filter(config: &str) -> Result<String, String> {
    let lines: Vec<&str> = config.lines().collect();
    let start = lines
        .iter()
        .position(|l| l.trim() == "- name: envoy.filters.http.wasm")
        .ok_or("envoy.yaml: no envoy.filters.http.wasm filter")?;
    let indent = lines
        .get(start)
        .map_or(0, |l| l.len() - l.trim_start().len());
    let end = lines
        .iter()
        .enumerate()
        .skip(start + 1)
        .find(|(_, l)| {
            let t = l.trim_start();
            t.starts_with("- ") && l.len() - t.len() <= indent
        })
        .map(|(i, _)| i)
        .ok_or("envoy.yaml: nothing follows the wasm filter")?;
    let mut out: Vec<&str> = lines[..start].to_vec();
    out.extend_from_slice(&lines[end..]);
    let mut text = out.join("\n");
    text.push('\n');
    Ok(text)
}

/// Starts the real daemon on the layout's socket and metrics port, logging to `log`.
fn spawn_daemon(layout: &Layout, config: Option<&Path>, log: &Path) -> Result<ChildGuard, String> {
    let bin = daemon_bin()?;
    let ort = ort_lib()?;
    let mut cmd = Command::new(bin);
    cmd.current_dir(workspace_root())
        .env("ORT_DYLIB_PATH", ort)
        .args(["serve", "--allow-root"]);
    if let Some(config) = config {
        let config = workspace_root().join(config);
        cmd.arg("--config")
            .arg(require(config, "the daemon configuration")?);
    }
    cmd.arg("--socket").arg(&layout.socket).args([
        "--metrics-addr",
        &format!("127.0.0.1:{}", layout.daemon_metrics_port.unwrap_or(0)),
    ]);
    ChildGuard::spawn("semroute-daemon", cmd, log.to_path_buf())
}

/// How to start a [`Router`].
#[derive(Debug, Clone, Default)]
pub struct RouterOptions {
    /// Start the real daemon (otherwise the socket stays absent).
    pub daemon: bool,
    /// The daemon's configuration file (`serve --config`), relative to the workspace
    /// root unless absolute; none: the daemon's built-in defaults (those of
    /// `config/daemon.toml`). The harness's socket and metrics address override the
    /// file's.
    pub daemon_config: Option<PathBuf>,
    /// Filter configuration replacing the one in `envoy.yaml`.
    pub filter_config: Option<Value>,
    /// Remove the semroute wasm filter from the Envoy configuration: the
    /// same Envoy without the router (a benchmark baseline). Every request
    /// then takes the default route.
    pub without_filter: bool,
    /// A wasm module in place of the semroute filter's, under the same filter entry and
    /// configuration (a benchmark baseline such as the buffered design of
    /// `tests/buffered-baseline`).
    pub wasm_module: Option<PathBuf>,
}

/// A running router: Envoy, optionally the daemon, and the upstreams.
pub struct Router {
    /// Ports and socket.
    pub layout: Layout,
    /// Scratch directory (socket, logs, rendered config); removed on drop.
    pub dir: tempfile_dir::TempDir,
    /// Envoy.
    pub envoy: ChildGuard,
    /// The daemon, when started.
    pub daemon: Option<ChildGuard>,
    /// The daemon's configuration file, for [`Router::restart_daemon`].
    daemon_config: Option<PathBuf>,
    /// Daemon starts so far (each logs to its own file).
    daemon_starts: u32,
    /// One per model.
    pub upstreams: Vec<ChildGuard>,
}

/// A tiny self-removing temporary directory (no extra dependency).
pub mod bench;
pub mod http_client;

pub mod tempfile_dir {
    use std::path::{Path, PathBuf};

    /// Directory under the system temp dir, removed on drop.
    #[derive(Debug)]
    pub struct TempDir(PathBuf);

    impl TempDir {
        /// Creates a fresh directory named `prefix-<pid>-<n>`.
        pub fn new(prefix: &str) -> std::io::Result<Self> {
            use std::sync::atomic::{AtomicU32, Ordering};
            static N: AtomicU32 = AtomicU32::new(0);
            // Short paths: Unix socket paths are limited to 107 bytes.
            let p = std::env::temp_dir().join(format!(
                "{prefix}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            std::fs::create_dir_all(&p)?;
            Ok(TempDir(p))
        }

        /// The directory.
        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            if std::env::var_os("SEMROUTE_KEEP_TMP").is_none() {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }
}

/// Attempts at starting a router whose ports were taken between
/// [`free_port`] releasing them and a component binding them (a concurrent
/// test or an outgoing connection can be handed the same port).
const START_ATTEMPTS: usize = 3;

impl Router {
    /// Starts upstreams, the daemon (when asked) and Envoy, and waits until
    /// each is ready. `upstream_bin` is the `semroute-upstream` binary. A
    /// start that fails because a chosen port was taken meanwhile is retried
    /// on new ports.
    pub fn start(upstream_bin: &Path, options: RouterOptions) -> Result<Router, String> {
        let mut attempt = 1;
        loop {
            match Router::start_once(upstream_bin, options.clone()) {
                Err(e) if attempt < START_ATTEMPTS && e.contains("Address already in use") => {
                    eprintln!("router start: a port was taken, retrying on new ports");
                    attempt += 1;
                }
                result => return result,
            }
        }
    }

    fn start_once(upstream_bin: &Path, options: RouterOptions) -> Result<Router, String> {
        let envoy_bin = envoy_bin()?;
        let wasm = match &options.wasm_module {
            Some(path) => require(path.clone(), "the wasm module")?,
            None => wasm_path()?,
        };
        let dir = tempfile_dir::TempDir::new("semroute-e2e").map_err(|e| e.to_string())?;
        let yaml = read_envoy_yaml()?;
        let clusters = upstream_clusters(&yaml);
        if clusters.is_empty() {
            return Err("envoy.yaml declares no upstream clusters".into());
        }
        // Envoy's listener and admin, the daemon's metrics, then one per upstream.
        let mut ports = free_ports(3 + clusters.len()).into_iter();
        let mut next_port = || ports.next().expect("one free port per component");
        let (port, admin_port, metrics_port) = (next_port(), next_port(), next_port());
        let upstreams: Vec<(String, u16)> = clusters
            .into_iter()
            .map(|(n, _)| (n, next_port()))
            .collect();
        let layout = Layout {
            port,
            admin_port,
            socket: dir.path().join("daemon.sock"),
            upstreams,
            daemon_metrics_port: options.daemon.then_some(metrics_port),
        };

        let mut children = Vec::new();
        for (model, port) in &layout.upstreams {
            let mut cmd = Command::new(upstream_bin);
            cmd.args(["--model", model, "--port", &port.to_string()]);
            children.push(ChildGuard::spawn(
                model,
                cmd,
                dir.path().join(format!("upstream-{model}.log")),
            )?);
        }

        let daemon = if options.daemon {
            Some(spawn_daemon(
                &layout,
                options.daemon_config.as_deref(),
                &dir.path().join("daemon.log"),
            )?)
        } else {
            None
        };

        let config_path = dir.path().join("envoy.yaml");
        let mut rendered = render_envoy_config(&layout, &wasm, options.filter_config.as_ref())?;
        if options.without_filter {
            rendered = without_wasm_filter(&rendered)?;
        }
        fs::write(&config_path, rendered).map_err(|e| e.to_string())?;
        let mut cmd = Command::new(envoy_bin);
        cmd.current_dir(workspace_root())
            .arg("-c")
            .arg(&config_path)
            .args(["--disable-hot-restart", "--concurrency", "1", "-l", "info"]);
        let envoy = ChildGuard::spawn("envoy", cmd, dir.path().join("envoy.log"))?;

        let mut router = Router {
            layout,
            dir,
            envoy,
            daemon,
            daemon_config: options.daemon_config.clone(),
            daemon_starts: 1,
            upstreams: children,
        };
        router.wait_ready()?;
        Ok(router)
    }

    fn wait_ready(&mut self) -> Result<(), String> {
        for (i, (model, port)) in self.layout.upstreams.clone().iter().enumerate() {
            // Ready when the upstream on the port is this model's: a process that took the
            // port first (and made this one fail to bind) answers for another model.
            let upstream = &mut self.upstreams[i];
            let mut exited = None;
            let ready = wait_until(Duration::from_secs(20), || {
                exited = upstream.exited();
                exited.is_some()
                    || http_get(*port, "/stats").is_some_and(|(s, b)| {
                        s == 200 && upstream_model(&b).as_deref() == Some(model.as_str())
                    })
            });
            if !ready || exited.is_some() {
                let state = match exited {
                    Some(status) => format!("exited with {status}"),
                    None => "not answering as itself after 20 s".to_string(),
                };
                return Err(format!(
                    "upstream {model} on port {port} not ready ({state}): {}",
                    upstream.log_excerpt(2000)
                ));
            }
        }
        let admin = self.layout.admin_port;
        let mut exited = None;
        let ready = wait_until(Duration::from_secs(60), || {
            exited = self.envoy.exited();
            exited.is_some()
                || http_get(admin, "/ready").is_some_and(|(s, b)| s == 200 && b.contains("LIVE"))
        });
        if !ready || exited.is_some() {
            return Err(format!(
                "Envoy did not become ready ({exited:?}):\n{}",
                self.envoy.log_excerpt(6000)
            ));
        }
        if let Some(d) = self.daemon.as_mut() {
            let socket = self.layout.socket.clone();
            let mut exited = None;
            let ok = wait_until(Duration::from_secs(180), || {
                exited = d.exited();
                exited.is_some() || socket.exists()
            });
            if !ok || exited.is_some() {
                return Err(format!(
                    "semroute-daemon did not create its socket ({exited:?}); run make setup / make build:\n{}",
                    d.log_excerpt(4000)
                ));
            }
        }
        Ok(())
    }

    /// Base URL of the router, e.g. `http://127.0.0.1:PORT`.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.layout.port)
    }

    /// Port of the upstream serving `model`.
    pub fn upstream_port(&self, model: &str) -> Option<u16> {
        self.layout
            .upstreams
            .iter()
            .find(|(m, _)| m == model)
            .map(|(_, p)| *p)
    }

    /// Requests answered by all upstreams so far.
    pub fn upstream_requests(&self) -> u64 {
        self.layout
            .upstreams
            .iter()
            .filter_map(|(_, p)| http_get(*p, "/stats"))
            .filter_map(|(_, b)| serde_json::from_str::<Value>(&b).ok())
            .filter_map(|v| v["requests"].as_u64())
            .sum()
    }

    /// The daemon's Prometheus text exposition (`/metrics`), `None` when no
    /// daemon was started or it does not answer.
    pub fn daemon_metrics(&self) -> Option<String> {
        let port = self.layout.daemon_metrics_port?;
        http_get(port, "/metrics")
            .filter(|(s, _)| *s == 200)
            .map(|(_, b)| b)
    }

    /// The value of one daemon metric sample, `series` being its name with
    /// labels exactly as exposed (e.g.
    /// `semroute_daemon_classify_requests_total{code="ok"}`); 0 when the
    /// series has not been created yet, `None` when the daemon's metrics
    /// cannot be read.
    pub fn daemon_metric(&self, series: &str) -> Option<f64> {
        let text = self.daemon_metrics()?;
        Some(metric_value(&text, series).unwrap_or(0.0))
    }

    /// The daemon's resident set size (`VmRSS` of `/proc/<pid>/status`), KiB; `None`
    /// when no daemon runs or it cannot be read.
    pub fn daemon_rss_kib(&self) -> Option<u64> {
        let pid = self.daemon.as_ref()?.id()?;
        proc_status_kib(pid, "VmRSS")
    }

    /// Starts the daemon again (after [`Router::stop_daemon`] or a crash), as a supervisor
    /// would, with the same configuration and a log file of its own; returns when it has
    /// bound its socket.
    pub fn restart_daemon(&mut self) -> Result<(), String> {
        if let Some(d) = self.daemon.as_mut() {
            d.stop();
        }
        self.daemon_starts += 1;
        let log = self
            .dir
            .path()
            .join(format!("daemon-{}.log", self.daemon_starts));
        // A socket file left by a killed daemon: the new one replaces it once bound.
        let started = std::time::SystemTime::now();
        let mut d = spawn_daemon(&self.layout, self.daemon_config.as_deref(), &log)?;
        let socket = self.layout.socket.clone();
        let mut exited = None;
        let ok = wait_until(Duration::from_secs(180), || {
            exited = d.exited();
            exited.is_some()
                || fs::metadata(&socket)
                    .and_then(|m| m.modified())
                    .is_ok_and(|t| t >= started)
        });
        let tail = d.log_excerpt(4000);
        self.daemon = Some(d);
        if !ok || exited.is_some() {
            return Err(format!(
                "semroute-daemon did not restart ({exited:?}):\n{tail}"
            ));
        }
        Ok(())
    }

    /// Stops the daemon (the socket path stays, as after a crash).
    pub fn stop_daemon(&mut self) {
        if let Some(d) = self.daemon.as_mut() {
            d.stop();
        }
    }

    /// Log tails of every process, for failure messages.
    pub fn logs(&self) -> String {
        let mut s = format!("--- envoy ---\n{}\n", self.envoy.log_excerpt(4000));
        if let Some(d) = &self.daemon {
            s.push_str(&format!("--- daemon ---\n{}\n", d.log_excerpt(3000)));
        }
        s
    }
}

impl Drop for Router {
    fn drop(&mut self) {
        if std::thread::panicking() {
            eprintln!(
                "router logs (kept in {} with SEMROUTE_KEEP_TMP=1):\n{}",
                self.dir.path().display(),
                self.logs()
            );
        }
        self.envoy.stop();
        if let Some(d) = self.daemon.as_mut() {
            d.stop();
        }
        for u in &mut self.upstreams {
            u.stop();
        }
    }
}

/// A `kB` field (`VmRSS`, `VmHWM`, ...) of `/proc/<pid>/status`, KiB.
pub fn proc_status_kib(pid: u32, field: &str) -> Option<u64> {
    let status = fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| {
        let v = l.strip_prefix(field)?.strip_prefix(':')?;
        v.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

/// The value of `series` (name and labels, as exposed) in a Prometheus text
/// exposition.
pub fn metric_value(text: &str, series: &str) -> Option<f64> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .find_map(|l| l.strip_prefix(series)?.strip_prefix(' '))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn envoy_yaml_renders_for_a_layout() {
        let yaml = read_envoy_yaml().unwrap();
        let clusters = upstream_clusters(&yaml);
        let names: Vec<&str> = clusters.iter().map(|(n, _)| n.as_str()).collect();
        assert!(
            names.contains(&"math-model") && names.contains(&"general-model"),
            "{names:?}"
        );
        assert!(!names.contains(&"semroute_daemon"));
        let layout = Layout {
            port: 20000,
            admin_port: 20001,
            socket: PathBuf::from("/tmp/x/daemon.sock"),
            upstreams: clusters
                .iter()
                .enumerate()
                .map(|(i, (n, _))| (n.clone(), 21000 + i as u16))
                .collect(),
            daemon_metrics_port: None,
        };
        let mut cfg = default_filter_config().unwrap();
        assert_eq!(cfg["default_model"], "general-model");
        cfg["failure_mode"] = "closed".into();
        let out = render_envoy_config(&layout, Path::new("/abs/f.wasm"), Some(&cfg)).unwrap();
        assert!(out.contains("port_value: 20000"));
        assert!(out.contains("path: /tmp/x/daemon.sock"));
        assert!(out.contains("filename: /abs/f.wasm"));
        assert!(out.contains("\"failure_mode\": \"closed\""));
        assert!(!out.contains("port_value: 8101"));
        assert_eq!(filter_config_block(&out).unwrap().3, cfg);
        let bare = without_wasm_filter(&out).unwrap();
        assert!(!bare.contains("envoy.filters.http.wasm"));
        assert!(!bare.contains("semroute_filter.wasm"));
        assert!(bare.contains("envoy.filters.http.router"));
        assert!(bare.contains("port_value: 20000"));
    }

    #[test]
    fn free_ports_are_distinct() {
        let ports = free_ports(64);
        let distinct: std::collections::HashSet<u16> = ports.iter().copied().collect();
        assert_eq!(distinct.len(), 64, "{ports:?}");
        assert!(!distinct.contains(&0));
    }

    #[test]
    fn an_upstream_is_known_by_its_stats() {
        let stats = r#"{"model":"code-model","requests":3}"#;
        assert_eq!(upstream_model(stats).as_deref(), Some("code-model"));
        assert_eq!(upstream_model("ok"), None);
        assert_eq!(upstream_model(r#"{"requests":3}"#), None);
    }

    #[test]
    fn proc_status_fields_are_read_in_kib() {
        let rss = proc_status_kib(std::process::id(), "VmRSS").unwrap();
        assert!(rss > 0);
        assert_eq!(proc_status_kib(std::process::id(), "NoSuchField"), None);
    }

    #[test]
    fn metric_values_are_read_by_series() {
        let text = "# HELP x y\nsemroute_daemon_classify_requests_total{code=\"ok\"} 3\n\
                    semroute_daemon_classify_requests_total{code=\"internal\"} 1\n";
        let ok = "semroute_daemon_classify_requests_total{code=\"ok\"}";
        assert_eq!(metric_value(text, ok), Some(3.0));
        assert_eq!(
            metric_value(text, "semroute_daemon_classify_requests_total"),
            None
        );
    }

    #[test]
    fn a_start_error_survives_a_long_backtrace_in_the_excerpt() {
        let dir = tempfile_dir::TempDir::new("semroute-excerpt").unwrap();
        let mut cmd = Command::new("sh");
        cmd.args([
            "-c",
            "echo 'Error: binding 127.0.0.1:1'; echo 'Caused by: Address already in use'; \
             i=0; while [ $i -lt 400 ]; do echo \"  $i: frame at src/main.rs\"; i=$((i+1)); done",
        ]);
        let mut child = ChildGuard::spawn("sh", cmd, dir.path().join("sh.log")).unwrap();
        assert!(wait_until(Duration::from_secs(10), || child
            .exited()
            .is_some()));
        let excerpt = child.log_excerpt(2000);
        assert!(excerpt.len() < 3100, "{} bytes", excerpt.len());
        assert!(excerpt.contains("Address already in use"), "{excerpt}");
        assert!(excerpt.contains("399: frame"), "{excerpt}");
    }
}
