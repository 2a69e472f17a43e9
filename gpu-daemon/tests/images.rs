//! The OCI images of `make images`, tried as a node would run them.
//!
//! The daemon image is unpacked with umoci into a runtime bundle and its process (args,
//! user, environment, from the bundle's `config.json`, i.e. the image config) is started
//! in its own mount, PID and network namespaces, chrooted into the root filesystem
//! mounted read-only, with the socket directory bind-mounted from the host as the
//! DaemonSet's hostPath is: a classification over that socket must come back. The filter
//! image's layer must be the `.wasm` the end-to-end tests load, byte for byte.
//!
//! Needs `make images` (root, umoci, util-linux's `unshare`); fails with a clear message
//! otherwise.

mod support;

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use semroute_daemon::client::{check_health, connect, CLASSIFIER_SERVICE};
use semroute_proto::v1::classifier_client::ClassifierClient;
use semroute_proto::v1::ClassifyRequest;
use support::workspace_root;
use tonic_health::pb::health_check_response::ServingStatus;

const VERSION: &str = env!("CARGO_PKG_VERSION");
/// The daemon's user and the gateway's group (scripts/build_images.sh, deploy/).
const DAEMON_UID: u32 = 65532;
const GATEWAY_GID: u32 = 1337;

fn image_layout(name: &str) -> PathBuf {
    let dir = workspace_root().join("build/images").join(name);
    assert!(
        dir.join("index.json").exists(),
        "{} missing: run `make images`",
        dir.display()
    );
    dir
}

fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

fn blob(layout: &Path, digest: &str) -> PathBuf {
    let (algorithm, hex) = digest.split_once(':').expect("digest algorithm:hex");
    layout.join("blobs").join(algorithm).join(hex)
}

/// The manifest tagged `VERSION` in an OCI image layout.
fn manifest(layout: &Path) -> serde_json::Value {
    let index = read_json(&layout.join("index.json"));
    let entry = index["manifests"]
        .as_array()
        .expect("index manifests")
        .iter()
        .find(|m| m["annotations"]["org.opencontainers.image.ref.name"] == VERSION)
        .unwrap_or_else(|| panic!("no manifest tagged {VERSION} in {}", layout.display()));
    read_json(&blob(layout, entry["digest"].as_str().expect("digest")))
}

#[test]
fn the_filter_image_layer_is_the_wasm_module_the_end_to_end_tests_load() {
    let layout = image_layout("filter");
    let m = manifest(&layout);
    assert_eq!(
        m["config"]["mediaType"],
        "application/vnd.module.wasm.config.v1+json"
    );
    let layers = m["layers"].as_array().expect("layers");
    assert_eq!(layers.len(), 1, "one layer: {layers:?}");
    assert_eq!(
        layers[0]["mediaType"],
        "application/vnd.module.wasm.content.layer.v1+wasm"
    );
    let layer = std::fs::read(blob(&layout, layers[0]["digest"].as_str().unwrap())).unwrap();
    let wasm_path = workspace_root().join("target/wasm32-wasip1/release/semroute_filter.wasm");
    let wasm = std::fs::read(&wasm_path)
        .unwrap_or_else(|e| panic!("{}: {e} (run `make build`)", wasm_path.display()));
    assert_eq!(layers[0]["size"], wasm.len() as u64);
    assert!(
        layer == wasm,
        "the image's plugin.wasm differs from {}: run `make images` again",
        wasm_path.display()
    );
}

/// The daemon started from the unpacked image, killed with its namespaces on drop.
struct Contained {
    child: Child,
    _dir: tempfile::TempDir,
}

impl Drop for Contained {
    /// Kills the whole process group: the daemon changed its user, which clears the
    /// parent-death signal `unshare --kill-child` set, so killing `unshare` alone would
    /// leave it running.
    fn drop(&mut self) {
        if let Ok(pgid) = i32::try_from(self.child.id()) {
            // SAFETY: kill has no memory-safety preconditions.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
        }
        let _ = self.child.wait();
    }
}

/// Runs `args` (absolute in the image) as `uid:gid` with `env`, chrooted into `rootfs`
/// mounted read-only, `/proc` of its own, and `socket_dir` at `/run/semroute`.
fn run_contained(
    dir: tempfile::TempDir,
    rootfs: &Path,
    socket_dir: &Path,
    process: &serde_json::Value,
) -> Contained {
    let uid = process["user"]["uid"].as_u64().expect("user.uid");
    let gid = process["user"]["gid"].as_u64().expect("user.gid");
    let args: Vec<&str> = process["args"]
        .as_array()
        .expect("process.args")
        .iter()
        .map(|a| a.as_str().expect("arg"))
        .collect();
    // $1 rootfs, $2 socket dir, $3 uid:gid, then the image's command.
    let script = r#"set -e
r=$1; s=$2; user=$3; shift 3
mount --bind "$r" "$r"
mount -o remount,bind,ro "$r"
mount --bind "$s" "$r/run/semroute"
mount -t proc proc "$r/proc"
# The environment is the image's, whose PATH may not hold chroot.
for chroot in /usr/sbin/chroot /usr/bin/chroot /sbin/chroot; do [ -x "$chroot" ] && break; done
exec "$chroot" --userspec="$user" "$r" "$@""#;
    let mut command = Command::new("unshare");
    command
        .args([
            "--mount",
            "--propagation",
            "private",
            "--pid",
            "--net",
            "--fork",
            "--kill-child",
            "sh",
            "-c",
            script,
            "sh",
        ])
        .arg(rootfs)
        .arg(socket_dir)
        .arg(format!("{uid}:{gid}"))
        .args(&args)
        .env_clear();
    for kv in process["env"].as_array().into_iter().flatten() {
        if let Some((k, v)) = kv.as_str().and_then(|s| s.split_once('=')) {
            command.env(k, v);
        }
    }
    let child = command
        .process_group(0)
        .stdout(Stdio::null())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("spawn unshare (util-linux)");
    Contained { child, _dir: dir }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_daemon_image_classifies_over_its_socket_from_a_read_only_root() {
    let layout = image_layout("daemon");
    assert_eq!(
        nix_uid(),
        0,
        "unpacking an image and entering namespaces needs root"
    );
    let dir = tempfile::tempdir().unwrap();
    let bundle = dir.path().join("bundle");
    let status = Command::new("umoci")
        .args(["unpack", "--image"])
        .arg(format!("{}:{VERSION}", layout.display()))
        .arg(&bundle)
        .stdout(Stdio::null())
        .status()
        .expect("run umoci (make image-tools)");
    assert!(status.success(), "umoci unpack failed");

    let spec = read_json(&bundle.join("config.json"));
    let process = &spec["process"];
    assert_eq!(process["user"]["uid"], DAEMON_UID, "non-root user");
    assert_eq!(process["user"]["gid"], GATEWAY_GID);

    // The hostPath directory as the DaemonSet's init container leaves it.
    let socket_dir = dir.path().join("socket");
    semroute_daemon::socket_dir::prepare(&socket_dir, DAEMON_UID, GATEWAY_GID, 0o2770).unwrap();
    let socket = socket_dir.join("daemon.sock");
    let rootfs = bundle.join("rootfs");
    let mut daemon = run_contained(dir, &rootfs, &socket_dir, process);

    let deadline = Instant::now() + Duration::from_secs(60);
    while !socket.exists() {
        if let Ok(Some(status)) = daemon.child.try_wait() {
            panic!("the image's daemon exited: {status}");
        }
        assert!(
            Instant::now() < deadline,
            "no socket within 60 s from the image's daemon"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    // Owned by the daemon's user, the gateway's group (set-group-ID directory), 0660.
    let meta = std::fs::metadata(&socket).unwrap();
    assert_eq!(
        (meta.uid(), meta.gid(), meta.permissions().mode() & 0o777),
        (DAEMON_UID, GATEWAY_GID, 0o660)
    );

    let status = check_health(&socket, CLASSIFIER_SERVICE, Duration::from_secs(5))
        .await
        .expect("health check");
    assert_eq!(status, ServingStatus::Serving);

    let mut client = ClassifierClient::new(connect(&socket).await.expect("connect"));
    let text =
        "What is the derivative of x^3 + 2x with respect to x? Write to jane.doe@example.com \
                when you are done.";
    let r = client
        .classify(ClassifyRequest {
            request_id: "image".into(),
            text: text.as_bytes().to_vec(),
            signals: vec!["domain".into(), "jailbreak".into(), "pii".into()],
            ..Default::default()
        })
        .await
        .expect("classify")
        .into_inner();
    let domain = r.domain.expect("domain result");
    assert_eq!(domain.label, "math", "{:?}", domain.distribution);
    let jailbreak = r.jailbreak.expect("jailbreak result").score;
    assert!(jailbreak < 0.5, "jailbreak score {jailbreak}");
    let pii = r.pii.expect("pii result").entities;
    assert!(
        pii.iter().any(|e| e.r#type == "EMAIL_ADDRESS"
            && &text[e.start as usize..e.end as usize] == "jane.doe@example.com"),
        "{pii:?}"
    );
}

fn nix_uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}
