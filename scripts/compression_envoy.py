#!/usr/bin/env python3
"""The filter's compression time inside Envoy (V8, the runtime the filter is deployed on),
per prompt, read from the filter's own `x-semroute-timing` header.

    python3 scripts/compression_envoy.py --texts DIR [--runs 10] [--warmup 2]

DIR holds prompts as `<name>.json` (`{"segments": [...], "pinned": [...]}`, written by
`compression_bench --dump-texts DIR`). Starts the inference daemon, the local upstreams and
Envoy from the repository's `envoy.yaml` (on free ports and a private daemon socket), sends
each prompt as the last user turn of `POST /v1/chat/completions` with `"model": "auto"`, one
content part per segment (the filter pins the last part, as the native benchmark pins the
question), and reads the timing the upstream received:

- `compress`: `PromptBuilder::finish` (ranking and selection) in the filter;
- `scan`: the incremental JSON scan of the body, which also feeds each decoded text chunk
  to `PromptBuilder::push_str` (segmentation and term statistics).

`scan + compress` is therefore the in-Envoy counterpart of the native benchmark's
push + finish total, plus JSON scanning. Needs `make build` (Envoy, daemon, upstream, the
wasm filter, ONNX Runtime and the models).
"""

import argparse
import http.client
import json
import os
import re
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("SEMROUTE_BUILD_DIR", os.path.join(ROOT, "build"))
ENVOY = os.path.join(BUILD, "envoy/envoy")
DAEMON = os.path.join(ROOT, "target/release/semroute-daemon")
UPSTREAM = os.path.join(ROOT, "target/release/semroute-upstream")
WASM = os.path.join(ROOT, "target/wasm32-wasip1/release/semroute_filter.wasm")
DAEMON_SOCKET = "/tmp/semroute/daemon.sock"


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http_get(port, path):
    try:
        c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        c.request("GET", path)
        return c.getresponse().status
    except OSError:
        return None


def wait_until(what, ready, timeout=60.0):
    deadline = time.time() + timeout
    while time.time() < deadline:
        if ready():
            return
        time.sleep(0.2)
    raise RuntimeError(f"{what} did not become ready")


def timing(value, name):
    """`name;dur=X` of a Server-Timing style header, in ms (None when absent)."""
    for part in value.split(","):
        n, _, d = part.strip().partition(";dur=")
        if n == name:
            return float(d)
    return None


class Router:
    """Daemon + upstreams + Envoy, stopped on exit (only the processes started here)."""

    def __init__(self):
        self.procs = []
        self.dir = tempfile.TemporaryDirectory(prefix="semroute-compress-")

    def spawn(self, name, cmd, env=None):
        log = open(os.path.join(self.dir.name, name + ".log"), "wb")
        p = subprocess.Popen(
            cmd, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True
        )
        self.procs.append(p)
        return p

    def log_tail(self, name, n=2000):
        try:
            with open(os.path.join(self.dir.name, name + ".log"), "rb") as f:
                return f.read()[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def __enter__(self):
        for path in (ENVOY, DAEMON, UPSTREAM, WASM):
            if not os.path.exists(path):
                raise RuntimeError(f"{path} is missing (make build)")
        with open(os.path.join(ROOT, "envoy.yaml"), encoding="utf-8") as f:
            yaml = f.read()
        sock = os.path.join(self.dir.name, "daemon.sock")
        pipe = f"path: {DAEMON_SOCKET}"
        if yaml.count(pipe) != 1:
            raise RuntimeError("envoy.yaml: daemon socket not found")
        yaml = yaml.replace(pipe, f"path: {sock}")
        self.port = free_port()
        self.admin = free_port()
        yaml = yaml.replace("port_value: 10000", f"port_value: {self.port}", 1)
        yaml = yaml.replace("port_value: 9901", f"port_value: {self.admin}", 1)
        # Upstream clusters: `- name: X` followed by a socket address on port 81xx.
        clusters = re.findall(r"- name: ([\w-]+)\n(?:(?!\s*- name:).*\n)*?.*port_value: (81\d\d)", yaml)
        ports = []
        for model, old in clusters:
            new = free_port()
            yaml = yaml.replace(f"port_value: {old} ", f"port_value: {new} ", 1)
            self.spawn(f"upstream-{model}", [UPSTREAM, "--model", model, "--port", str(new)])
            ports.append(new)
        cfg = os.path.join(self.dir.name, "envoy.yaml")
        with open(cfg, "w", encoding="utf-8") as f:
            f.write(yaml)
        env = dict(os.environ)
        env.setdefault("ORT_DYLIB_PATH", os.path.join(BUILD, "onnxruntime/libonnxruntime.so"))
        self.spawn(
            "daemon",
            [DAEMON, "serve", "--allow-root", "--config", "config/daemon.toml", "--socket", sock,
             "--metrics-addr", f"127.0.0.1:{free_port()}"],
            env=env,
        )
        try:
            wait_until("daemon", lambda: os.path.exists(sock))
            for p in ports:
                wait_until(f"upstream :{p}", lambda p=p: http_get(p, "/health") == 200)
            self.spawn(
                "envoy",
                [ENVOY, "-c", cfg, "--disable-hot-restart", "--concurrency", "1", "-l", "warning"],
            )
            wait_until("Envoy", lambda: http_get(self.admin, "/ready") == 200)
        except Exception:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, *exc):
        for p in self.procs:
            if p.poll() is None:
                p.terminate()
        for p in self.procs:
            try:
                p.wait(timeout=10)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        self.dir.cleanup()

    def classify(self, conn, segments):
        """Sends one prompt; returns the `x-semroute-timing` value the upstream received."""
        body = json.dumps(
            {
                "model": "auto",
                "messages": [
                    {"role": "user", "content": [{"type": "text", "text": s} for s in segments]}
                ],
            }
        ).encode()
        conn.request(
            "POST", "/v1/chat/completions", body, {"content-type": "application/json"}
        )
        r = conn.getresponse()
        data = r.read()
        if r.status != 200:
            raise RuntimeError(f"status {r.status}: {data[:300]!r}")
        value = json.loads(data).get("semroute", {}).get("headers", {}).get("x-semroute-timing")
        if not value:
            raise RuntimeError("no x-semroute-timing reached the upstream")
        return value


def measure(texts_dir, names, runs, warmup):
    """Per prompt name: {"compress_ms", "scan_ms", "total_ms"} medians over `runs`."""
    out = {}
    with Router() as router:
        conn = http.client.HTTPConnection("127.0.0.1", router.port, timeout=30)
        for name in names:
            with open(os.path.join(texts_dir, name + ".json"), encoding="utf-8") as f:
                segments = json.load(f)["segments"]
            comp, scan = [], []
            for i in range(warmup + runs):
                v = router.classify(conn, segments)
                if i >= warmup:
                    comp.append(timing(v, "compress"))
                    scan.append(timing(v, "scan"))
            out[name] = {
                "compress_ms": statistics.median(comp),
                "scan_ms": statistics.median(scan),
                "total_ms": statistics.median(c + s for c, s in zip(comp, scan)),
                "runs": runs,
            }
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", required=True, help="directory of <name>.json prompts")
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--warmup", type=int, default=2)
    args = ap.parse_args()
    names = sorted(
        (f[:-5] for f in os.listdir(args.texts) if f.endswith(".json")),
        key=lambda n: (len(n), n),
    )
    rows = measure(args.texts, names, args.runs, args.warmup)
    print(f"Envoy (V8): median of {args.runs} requests after {args.warmup} warm-up")
    print(f"{'prompt':<16} {'scan ms':>9} {'compress ms':>12} {'total ms':>9}")
    for name in names:
        r = rows[name]
        print(f"{name:<16} {r['scan_ms']:>9.2f} {r['compress_ms']:>12.2f} {r['total_ms']:>9.2f}")


if __name__ == "__main__":
    main()
