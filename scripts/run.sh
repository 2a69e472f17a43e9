#!/usr/bin/env bash
# Starts the whole router on this machine: the inference daemon, one local
# OpenAI-compatible upstream per model, and Envoy with the semroute filter.
# Sends one example request, prints the decision, then serves until Ctrl-C
# and stops everything. Called by `make run` after `make build`.
#
#   PORT=10000   listener port (Envoy)
set -euo pipefail
cd "$(dirname "$0")/.."

PORT="${PORT:-10000}"
BUILD="${SEMROUTE_BUILD_DIR:-build}"
RUN_DIR="$BUILD/run"
SOCKET=/tmp/semroute/daemon.sock
export ORT_DYLIB_PATH="${ORT_DYLIB_PATH:-$PWD/$BUILD/onnxruntime/libonnxruntime.so}"
mkdir -p "$RUN_DIR"

pids=()
cleanup() {
  trap - INT TERM EXIT
  echo
  echo "stopping semroute..."
  for pid in "${pids[@]}"; do kill -TERM "$pid" 2>/dev/null || true; done
  for pid in "${pids[@]}"; do wait "$pid" 2>/dev/null || true; done
  echo "stopped."
}
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap cleanup EXIT

wait_for() { # description, command...
  local what=$1; shift
  for _ in $(seq 1 300); do
    if "$@" >/dev/null 2>&1; then return 0; fi
    sleep 0.2
  done
  echo "error: $what did not become ready; logs are in $RUN_DIR" >&2
  exit 1
}

# The daemon runs under a restart loop, as a DaemonSet's pod does (restartPolicy: Always):
# while it is down the filter applies its failure mode (fail-open by default) and Envoy keeps
# serving; stopping the loop stops the daemon.
run_daemon() {
  local child=""
  trap '[ -n "$child" ] && kill -TERM "$child" 2>/dev/null; wait "$child" 2>/dev/null; exit 0' INT TERM
  while true; do
    target/release/semroute-daemon serve --allow-root --config config/daemon.toml --socket "$SOCKET" >>"$RUN_DIR/daemon.log" 2>&1 &
    child=$!
    status=0
    wait "$child" || status=$?
    echo "semroute-daemon exited with status $status; restarting in 1 s" | tee -a "$RUN_DIR/daemon.log" >&2
    sleep 1
  done
}

echo "starting semroute-daemon (models load in a few seconds) -> $RUN_DIR/daemon.log"
: >"$RUN_DIR/daemon.log"
run_daemon &
pids+=($!)

port=8101
for model in math-model code-model science-model law-model general-model local-pii-model; do
  target/release/semroute-upstream --model "$model" --port "$port" >"$RUN_DIR/upstream-$model.log" 2>&1 &
  pids+=($!)
  port=$((port + 1))
done

sed -e "s/port_value: 10000/port_value: $PORT/" envoy.yaml >"$RUN_DIR/envoy.yaml"
wait_for "semroute-daemon" test -S "$SOCKET"
for p in 8101 8102 8103 8104 8105 8106; do
  wait_for "upstream on port $p" curl -sf "http://127.0.0.1:$p/health"
done
echo "starting Envoy on 127.0.0.1:$PORT -> $RUN_DIR/envoy.log"
"$BUILD/envoy/envoy" -c "$RUN_DIR/envoy.yaml" --disable-hot-restart --concurrency 2 -l warning >"$RUN_DIR/envoy.log" 2>&1 &
pids+=($!)
wait_for "Envoy" curl -sf "http://127.0.0.1:9901/ready"

body='{"model":"auto","messages":[{"role":"user","content":"What is the derivative of x^3 + 2x with respect to x?"}]}'
echo
echo "example: POST /v1/chat/completions $body"
curl -sS -D "$RUN_DIR/example.headers" -o "$RUN_DIR/example.json" "http://127.0.0.1:$PORT/v1/chat/completions" \
  -H 'content-type: application/json' -d "$body"
grep -i '^x-semroute' "$RUN_DIR/example.headers" | sed 's/^/  /' || true
python3 -c 'import json,sys; r=json.load(open(sys.argv[1])); print("  answered by:", r.get("model"), "|", r["choices"][0]["message"]["content"][:160])' "$RUN_DIR/example.json" || cat "$RUN_DIR/example.json"
echo
echo "semroute is serving on http://127.0.0.1:$PORT (OpenAI-compatible: /v1/chat/completions, /v1/responses)."
echo "daemon metrics: http://127.0.0.1:9190/metrics   Envoy admin: http://127.0.0.1:9901"
echo "press Ctrl-C to stop."
wait -n "${pids[@]}" || true
echo "a component exited; see the logs in $RUN_DIR" >&2
