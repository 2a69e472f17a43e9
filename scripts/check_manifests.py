#!/usr/bin/env python3
"""Checks the manifests in deploy/ against Kubernetes, Istio and semroute's own code.

- Kubernetes resources (ConfigMap, DaemonSet, ...): `kubernetes-validate`, strict
  (unknown fields rejected), for every supported Kubernetes version.
- Istio resources (WasmPlugin, EnvoyFilter): JSON Schema validation against the CRD
  schemas extracted from Istio's own CRD definitions (--schemas, one file per
  `<kind>-<group prefix>-<version>.json`).
- The WasmPlugin's `pluginConfig`: parsed by the filter's configuration code, built
  natively (the example `check_config`), the code Envoy runs.
- The daemon's ConfigMap: its daemon.toml must be deploy/daemon.toml (the daemon
  image's default) byte for byte, and the daemon's config loader must accept it
  (`semroute-daemon check-config`).
- The wiring between them: the WasmPlugin's daemon cluster is the one the EnvoyFilter
  adds, the gateway's socket and the daemon's socket are the same file of the same
  hostPath, the metrics port is the one annotated for scraping.

Exits non-zero listing every failure.

Usage: check_manifests.py [--deploy deploy] [--schemas ../shared/schemas]
       [--filter-check target/release/examples/check_config]
       [--daemon target/release/semroute-daemon]
"""

import argparse
import json
import os
import posixpath
import subprocess
import sys
import tempfile
from pathlib import Path

import jsonschema
import kubernetes_validate
import yaml

# Kubernetes minor versions the manifests are checked against: the releases upstream
# supports at the time of writing (1.35 to 1.37).
KUBERNETES_VERSIONS = ["1.35.0", "1.36.0", "1.37.0"]

# kind -> schema file in --schemas
ISTIO_SCHEMAS = {
    ("extensions.istio.io/v1alpha1", "WasmPlugin"): "wasmplugin-extensions-v1alpha1.json",
    ("networking.istio.io/v1alpha3", "EnvoyFilter"): "envoyfilter-networking-v1alpha3.json",
}


def load_documents(deploy: Path, failures: list[str]) -> list[tuple[Path, dict]]:
    docs = []
    for path in sorted(deploy.glob("*.yaml")):
        try:
            with path.open() as f:
                docs.extend((path, d) for d in yaml.safe_load_all(f) if d is not None)
        except yaml.YAMLError as e:
            failures.append(f"{path.name}: not YAML: {e}")
    return docs


def name_of(path: Path, doc: dict) -> str:
    return f"{path.name}: {doc.get('kind')}/{doc.get('metadata', {}).get('name')}"


def find(docs, kind: str) -> list[dict]:
    return [d for _, d in docs if d.get("kind") == kind]


def check_kubernetes(path: Path, doc: dict, failures: list[str]) -> None:
    for version in KUBERNETES_VERSIONS:
        try:
            kubernetes_validate.validate(doc, version, strict=True)
        except kubernetes_validate.ValidationError as e:
            failures.append(f"{name_of(path, doc)} on Kubernetes {version}: {e.message} at {list(e.path)}")
        except kubernetes_validate.SchemaNotFoundError as e:
            failures.append(f"{name_of(path, doc)}: no Kubernetes {version} schema: {e}")


def check_istio(path: Path, doc: dict, schema: dict, failures: list[str]) -> None:
    validator = jsonschema.Draft7Validator(schema)
    # The CRD schema covers `spec` (and `status`); apiVersion, kind and metadata are
    # the API server's.
    body = {k: v for k, v in doc.items() if k not in ("apiVersion", "kind", "metadata")}
    for error in validator.iter_errors(body):
        failures.append(f"{name_of(path, doc)}: {error.message} at {'/'.join(map(str, error.path))}")


def run(cmd: list[str], what: str, failures: list[str]) -> None:
    env = {**os.environ, "RUST_BACKTRACE": "0"}
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        failures.append(f"{what}: {(r.stdout + r.stderr).strip()}")


def main() -> int:
    root = Path(__file__).resolve().parent.parent
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--deploy", type=Path, default=root / "deploy")
    ap.add_argument("--schemas", type=Path, default=root.parent / "shared" / "schemas")
    ap.add_argument("--filter-check", type=Path, default=root / "target/release/examples/check_config")
    ap.add_argument("--daemon", type=Path, default=root / "target/release/semroute-daemon")
    args = ap.parse_args()

    for tool in (args.filter_check, args.daemon):
        if not tool.exists():
            print(f"{tool} missing: run `make check-manifests`", file=sys.stderr)
            return 2
    failures: list[str] = []
    docs = load_documents(args.deploy, failures)
    checked = 0

    for path, doc in docs:
        key = (doc.get("apiVersion"), doc.get("kind"))
        if key in ISTIO_SCHEMAS:
            schema_path = args.schemas / ISTIO_SCHEMAS[key]
            check_istio(path, doc, json.loads(schema_path.read_text()), failures)
        elif str(key[0]).endswith(".istio.io") or "/" in str(key[0]) and "." in str(key[0]).split("/")[0]:
            failures.append(f"{name_of(path, doc)}: no schema for {key[0]} {key[1]}")
        else:
            check_kubernetes(path, doc, failures)
        checked += 1

    # The filter's policy, parsed by the filter's own code.
    plugins = find(docs, "WasmPlugin")
    if not plugins:
        failures.append("no WasmPlugin in deploy/")
    with tempfile.TemporaryDirectory() as tmp:
        for plugin in plugins:
            config = Path(tmp) / "plugin-config.json"
            config.write_text(json.dumps(plugin["spec"].get("pluginConfig", {})))
            run([str(args.filter_check), str(config)], f"WasmPlugin/{plugin['metadata']['name']} pluginConfig", failures)

        # The daemon's configuration: the image's default, accepted by the daemon's loader.
        image_config = (args.deploy / "daemon.toml").read_text()
        daemon_toml = None
        for cm in find(docs, "ConfigMap"):
            if "daemon.toml" in cm.get("data", {}):
                daemon_toml = cm["data"]["daemon.toml"]
                if daemon_toml != image_config:
                    failures.append(f"ConfigMap/{cm['metadata']['name']}: daemon.toml differs from deploy/daemon.toml")
                path = Path(tmp) / "daemon.toml"
                path.write_text(daemon_toml)
                run([str(args.daemon), "check-config", "--config", str(path)],
                    f"ConfigMap/{cm['metadata']['name']} daemon.toml", failures)
        if daemon_toml is None:
            failures.append("no ConfigMap with daemon.toml in deploy/")

    check_wiring(docs, daemon_toml, failures)

    if failures:
        print(f"check_manifests: {len(failures)} failure(s) in {checked} resources:")
        for f in failures:
            print(f"  - {f}")
        return 1
    print(f"check_manifests: {checked} resources valid (Kubernetes {', '.join(KUBERNETES_VERSIONS)}; "
          f"Istio CRD schemas; pluginConfig and daemon.toml parsed by semroute's own code)")
    return 0


def check_wiring(docs, daemon_toml: str | None, failures: list[str]) -> None:
    """The pieces must point at each other: cluster name, socket, metrics port."""
    import tomllib

    clusters, pipes = set(), set()
    for ef in find(docs, "EnvoyFilter"):
        for patch in ef["spec"].get("configPatches", []):
            value = patch.get("patch", {}).get("value", {})
            if patch.get("applyTo") == "CLUSTER" and "name" in value:
                clusters.add(value["name"])
                for ep in value.get("load_assignment", {}).get("endpoints", []):
                    for lb in ep.get("lb_endpoints", []):
                        pipe = lb.get("endpoint", {}).get("address", {}).get("pipe")
                        if pipe:
                            pipes.add(pipe["path"])
    for plugin in find(docs, "WasmPlugin"):
        cluster = plugin["spec"].get("pluginConfig", {}).get("daemon", {}).get("cluster")
        if cluster not in clusters:
            failures.append(f"WasmPlugin/{plugin['metadata']['name']}: daemon cluster {cluster!r} "
                            f"is not added by any EnvoyFilter ({sorted(clusters)})")
    if daemon_toml is None:
        return
    config = tomllib.loads(daemon_toml)
    socket = config.get("socket", "")
    for ds in find(docs, "DaemonSet"):
        spec = ds["spec"]["template"]["spec"]
        host_paths = {v["name"]: v["hostPath"]["path"] for v in spec.get("volumes", []) if "hostPath" in v}
        for c in spec["containers"]:
            mounts = {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])}
            volume = mounts.get(posixpath.dirname(socket))
            if volume not in host_paths:
                failures.append(f"DaemonSet/{ds['metadata']['name']}: the socket directory of daemon.toml "
                                f"({posixpath.dirname(socket)}) is not a hostPath mount")
                continue
            host_socket = posixpath.join(host_paths[volume], posixpath.basename(socket))
            if pipes and host_socket not in pipes:
                failures.append(f"DaemonSet/{ds['metadata']['name']}: the daemon's socket is {host_socket} on the "
                                f"node; the EnvoyFilter connects to {sorted(pipes)}")
            port = str(config.get("metrics_addr", "")).rsplit(":", 1)[-1]
            annotated = ds["spec"]["template"]["metadata"].get("annotations", {}).get("prometheus.io/port")
            ports = {str(p["containerPort"]) for p in c.get("ports", [])}
            if annotated != port or port not in ports:
                failures.append(f"DaemonSet/{ds['metadata']['name']}: metrics on port {port}, annotated "
                                f"{annotated}, container ports {sorted(ports)}")


if __name__ == "__main__":
    sys.exit(main())
