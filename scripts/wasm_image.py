#!/usr/bin/env python3
"""Writes the filter's .wasm as a Wasm OCI image, in an OCI image layout directory.

The layout is the one Istio's WasmPlugin pulls (`url: oci://...`): an OCI image
manifest whose config has media type `application/vnd.module.wasm.config.v1+json`
and whose one layer, `application/vnd.module.wasm.content.layer.v1+wasm` titled
`plugin.wasm`, is the module's bytes unchanged (so the layer digest is the
module's sha256). Istio also accepts a plain container image holding
`plugin.wasm`; this variant needs no tar and no gzip, and a registry stores it as
an artifact.

Reproducible: every field comes from the inputs (the module, the version, the
creation time from SOURCE_DATE_EPOCH), JSON is written with sorted keys and no
whitespace, so the same inputs give the same manifest digest.

Usage: wasm_image.py --wasm FILE --layout DIR --tag VERSION [--created RFC3339]
"""

import argparse
import hashlib
import json
import os
import shutil
import sys
import time
from pathlib import Path

MANIFEST_TYPE = "application/vnd.oci.image.manifest.v1+json"
CONFIG_TYPE = "application/vnd.module.wasm.config.v1+json"
LAYER_TYPE = "application/vnd.module.wasm.content.layer.v1+wasm"


def canonical(obj) -> bytes:
    return json.dumps(obj, sort_keys=True, separators=(",", ":")).encode()


def put_blob(layout: Path, data: bytes) -> dict:
    digest = hashlib.sha256(data).hexdigest()
    path = layout / "blobs" / "sha256" / digest
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return {"digest": f"sha256:{digest}", "size": len(data)}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--wasm", type=Path, required=True)
    ap.add_argument("--layout", type=Path, required=True)
    ap.add_argument("--tag", required=True)
    ap.add_argument("--created", help="RFC 3339 time (default: from SOURCE_DATE_EPOCH, else 1970)")
    args = ap.parse_args()

    wasm = args.wasm.read_bytes()
    if wasm[:4] != b"\0asm":
        print(f"{args.wasm}: not a WebAssembly module", file=sys.stderr)
        return 1
    created = args.created or time.strftime(
        "%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(os.environ.get("SOURCE_DATE_EPOCH", "0")))
    )

    # A fresh layout every time: no stale blobs from an earlier build.
    if args.layout.exists():
        shutil.rmtree(args.layout)
    args.layout.mkdir(parents=True)
    (args.layout / "oci-layout").write_bytes(canonical({"imageLayoutVersion": "1.0.0"}))

    layer = put_blob(args.layout, wasm)
    config = put_blob(args.layout, canonical({"created": created, "type": "envoy_proxy"}))
    manifest = {
        "schemaVersion": 2,
        "mediaType": MANIFEST_TYPE,
        "config": {"mediaType": CONFIG_TYPE, **config},
        "layers": [
            {
                "mediaType": LAYER_TYPE,
                **layer,
                "annotations": {"org.opencontainers.image.title": "plugin.wasm"},
            }
        ],
        "annotations": {
            "org.opencontainers.image.created": created,
            "org.opencontainers.image.title": "semroute-filter",
            "org.opencontainers.image.version": args.tag,
        },
    }
    manifest_blob = put_blob(args.layout, canonical(manifest))
    index = {
        "schemaVersion": 2,
        "mediaType": "application/vnd.oci.image.index.v1+json",
        "manifests": [
            {
                "mediaType": MANIFEST_TYPE,
                **manifest_blob,
                "annotations": {"org.opencontainers.image.ref.name": args.tag},
            }
        ],
    }
    (args.layout / "index.json").write_bytes(canonical(index))
    print(f"{args.layout}:{args.tag} {manifest_blob['digest']} (layer {layer['digest']}, {len(wasm)} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
