#!/usr/bin/env bash
# make images: the two OCI images of semroute, as OCI image layouts under build/images/,
# built without Docker and without pulling anything from a container registry.
#
#   build/images/daemon:<version>  Debian's C and C++ runtime (mmdebstrap, extract
#       variant: files only, no shell, no package manager), then one layer with
#       semroute-daemon, ONNX Runtime, the prepared router encoder and Rampart, the
#       heads and deploy/daemon.toml; user 65532 (group 1337, Istio's proxy group, which
#       shares the socket); entry point `semroute-daemon serve`. Assembled with umoci.
#   build/images/filter:<version>  the filter's .wasm as a Wasm OCI image, the layout
#       Istio's WasmPlugin pulls (scripts/wasm_image.py).
#
# Reproducible: every timestamp is SOURCE_DATE_EPOCH (default: the last commit's time),
# files are owned by root and sorted, so the same inputs (binaries, models, the
# Debian packages the mirror serves) give the same digests. Needs root (mmdebstrap
# in root mode, file ownership) and Debian's umoci and mmdebstrap (`make image-tools`).
set -euo pipefail
cd "$(dirname "$0")/.."

OUT=build/images
VERSION=$(sed -n 's/^version = "\(.*\)"$/\1/p' Cargo.toml | head -n 1)
SOURCE_DATE_EPOCH=${SOURCE_DATE_EPOCH:-$(git log -1 --format=%ct 2>/dev/null || echo 0)}
export SOURCE_DATE_EPOCH
CREATED=$(date -u -d "@$SOURCE_DATE_EPOCH" +%Y-%m-%dT%H:%M:%SZ)
DEBIAN_SUITE=bookworm
# What semroute-daemon and libonnxruntime.so link against (ldd), plus base-files
# (os-release, licences).
BASE_PACKAGES=libc6,libgcc-s1,libstdc++6,base-files
DAEMON_UID=65532
GATEWAY_GID=1337

die() { echo "make images: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || die "needs root (mmdebstrap in root mode, root-owned files in the layers)"
for tool in umoci mmdebstrap; do
    command -v "$tool" >/dev/null || die "$tool missing: run \`make image-tools\`"
done
for f in target/release/semroute-daemon build/onnxruntime/libonnxruntime.so \
    build/models/prepared/router/model.onnx build/models/prepared/rampart/model.onnx \
    target/wasm32-wasip1/release/semroute_filter.wasm; do
    [ -e "$f" ] || die "$f missing: run \`make build\`"
done

work=$OUT/work
rm -rf "$work"
mkdir -p "$work"

# ---------------------------------------------------------------- daemon: base layer
# /dev is left out (the runtime provides it); apt's caches and lists are removed.
mmdebstrap --quiet --mode=root --variant=extract --include="$BASE_PACKAGES" \
    --skip=output/dev \
    --customize-hook='rm -rf "$1"/var/cache/apt "$1"/var/lib/apt "$1"/var/log/apt' \
    "$DEBIAN_SUITE" "$work/base.tar"

# ---------------------------------------------------------------- daemon: semroute layer
root=$work/daemon-root
# Debug sections stripped (symbols kept, so backtraces still name functions).
install -d -m 0755 "$root/usr/local/bin"
objcopy --strip-debug target/release/semroute-daemon "$root/usr/local/bin/semroute-daemon"
chmod 0755 "$root/usr/local/bin/semroute-daemon"
ort=$root/usr/lib/semroute/onnxruntime
install -D -m 0644 build/onnxruntime/libonnxruntime.so "$ort/libonnxruntime.so"
install -m 0644 build/onnxruntime/libonnxruntime_providers_shared.so "$ort/"
install -m 0644 build/onnxruntime/LICENSE "$ort/LICENSE"
models=$root/usr/share/semroute/models
for f in model.onnx config.json tokenizer.json PREPARED.json; do
    install -D -m 0644 "build/models/prepared/router/$f" "$models/router/$f"
done
for f in model.onnx config.json tokenizer.json tokenizer_config.json special_tokens_map.json \
    vocab.txt LICENSE PREPARED.json; do
    install -D -m 0644 "build/models/prepared/rampart/$f" "$models/rampart/$f"
done
install -D -m 0644 models/router/domain.json "$root/usr/share/semroute/heads/domain.json"
install -m 0644 models/router/jailbreak.json "$root/usr/share/semroute/heads/jailbreak.json"
install -m 0644 models/ngrams/jailbreak.safetensors "$root/usr/share/semroute/heads/jailbreak_ngrams.safetensors"
install -m 0644 models/ngrams/domain.safetensors "$root/usr/share/semroute/heads/domain_ngrams.safetensors"
install -D -m 0644 deploy/daemon.toml "$root/etc/semroute/daemon.toml"
install -d -m 0755 "$root/etc" "$root/run/semroute"
printf 'root:x:0:0:root:/root:/usr/sbin/nologin\nsemroute:x:%s:%s:semroute daemon:/nonexistent:/usr/sbin/nologin\n' \
    "$DAEMON_UID" "$GATEWAY_GID" > "$root/etc/passwd"
printf 'root:x:0:\ngateway:x:%s:\n' "$GATEWAY_GID" > "$root/etc/group"
chmod 0644 "$root/etc/passwd" "$root/etc/group"
tar --create --file "$work/semroute.tar" --directory "$root" --sort=name --format=posix \
    --pax-option=exthdr.name=%d/PaxHeaders/%f,delete=atime,delete=ctime \
    --mtime="@$SOURCE_DATE_EPOCH" --owner=0 --group=0 --numeric-owner .

# ---------------------------------------------------------------- daemon: image
image=$OUT/daemon
rm -rf "$image"
umoci init --layout "$image"
umoci new --image "$image:$VERSION"
umoci raw add-layer --image "$image:$VERSION" --history.created "$CREATED" \
    --history.created_by "mmdebstrap --variant=extract --include=$BASE_PACKAGES $DEBIAN_SUITE" \
    "$work/base.tar"
umoci raw add-layer --image "$image:$VERSION" --history.created "$CREATED" \
    --history.created_by "semroute-daemon $VERSION, ONNX Runtime, prepared models, heads, config" \
    "$work/semroute.tar"
umoci config --image "$image:$VERSION" --created "$CREATED" --history.created "$CREATED" \
    --author semroute --architecture amd64 --os linux \
    --config.user "$DAEMON_UID:$GATEWAY_GID" --config.workingdir / \
    --config.env PATH=/usr/local/bin:/usr/bin:/bin \
    --config.entrypoint /usr/local/bin/semroute-daemon \
    --config.cmd serve --config.cmd --config --config.cmd /etc/semroute/daemon.toml \
    --config.exposedports 9190/tcp --config.volume /run/semroute \
    --config.label org.opencontainers.image.title=semroute-daemon \
    --config.label "org.opencontainers.image.version=$VERSION" \
    --config.label org.opencontainers.image.licenses=Apache-2.0 \
    --manifest.annotation "org.opencontainers.image.created=$CREATED" \
    --manifest.annotation "org.opencontainers.image.version=$VERSION"
umoci gc --layout "$image"

# ---------------------------------------------------------------- filter
python3 scripts/wasm_image.py --wasm target/wasm32-wasip1/release/semroute_filter.wasm \
    --layout "$OUT/filter" --tag "$VERSION" --created "$CREATED" > /dev/null

rm -rf "$work"

# ---------------------------------------------------------------- report
echo "| image | manifest digest | compressed | uncompressed |"
echo "|---|---|---:|---:|"
for name in daemon filter; do
    python3 - "$OUT/$name" "$VERSION" "$name" <<'EOF'
import json, os, sys
layout, tag, name = sys.argv[1:]
blob = lambda d: os.path.join(layout, "blobs", *d.split(":"))
index = json.load(open(os.path.join(layout, "index.json")))
desc = next(m for m in index["manifests"]
            if m.get("annotations", {}).get("org.opencontainers.image.ref.name") == tag)
manifest = json.load(open(blob(desc["digest"])))
stored = sum(l["size"] for l in manifest["layers"]) + manifest["config"]["size"]
if name == "daemon":
    import gzip
    raw = 0
    for l in manifest["layers"]:
        with gzip.open(blob(l["digest"])) as f:
            while chunk := f.read(1 << 20):
                raw += len(chunk)
else:
    raw = stored
mib = lambda n: f"{n / 2**20:.1f} MiB"
print(f"| {name}:{tag} | `{desc['digest']}` | {mib(stored)} | {mib(raw)} |")
EOF
done
