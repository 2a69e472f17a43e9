#!/usr/bin/env python3
"""Compression time per prompt size: the filter's compressor natively and as a wasm module,
against a classical TextRank baseline on the same texts, in one run and one table.

    python3 scripts/compression_bench.py [--sizes 2000,8000,16000,32000] [--runs 15]
        [--baseline-runs 3] [--baseline-max-seconds 10] [--envoy-runs 10] [--no-envoy]
        [--work DIR]

Needs, built beforehand (`make bench` does):

    cargo build --release -p semroute-filter --example compression_bench
    cargo build --release -p semroute-filter --example compression_bench --target wasm32-wasip1

1. native: `target/release/examples/compression_bench --json --dump-texts DIR`: push_str in
   8 KiB chunks + finish to a 512-token budget, median of `--runs`; it also writes the
   generated prompts to DIR.
2. wasm: the same example built for `wasm32-wasip1`, run by Wasmtime (the PyPI `wasmtime`
   package, Cranelift), same arguments, so the same generated prompts. The module also
   carries the filter's proxy-wasm entry points; their host imports are stubbed (never
   called). Envoy runs the filter in V8, whose code differs from Cranelift's; this column
   measures the cost of the wasm target, not V8's exact figure.
3. Envoy: the filter in Envoy's V8 (`compression_envoy.py`): the same prompts sent through
   the running router, timed by the filter itself (`x-semroute-timing`: `scan`, the JSON scan
   that also feeds `push_str`, plus `compress`, the `finish`); needs `make build`. Skipped
   with `--no-envoy` or when a component is missing.
4. baseline: `summa`'s TextRank (PyPI, pure Python; see `compression_baseline.py`) on the same
   texts, summary length in words chosen per prompt as 510 tokens times the prompt's
   words-per-token ratio, so both cut to the same share of the prompt.

`wasmtime` and `summa` are installed with pip when missing.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import compression_baseline  # noqa: E402
import compression_envoy  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NATIVE = os.path.join(ROOT, "target/release/examples/compression_bench")
WASM = os.path.join(ROOT, "target/wasm32-wasip1/release/examples/compression_bench.wasm")
KEPT_TOKENS = 510  # 512-token budget minus [CLS] and [SEP]


def ensure(module, package):
    """Imports `module`, installing `package` with pip first if needed."""
    try:
        __import__(module)
    except ImportError:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--quiet", package], stdout=sys.stderr
        )


def parse_lines(text):
    """The JSON objects printed one per line by `compression_bench --json`, by prompt name."""
    rows = {}
    for line in text.splitlines():
        line = line.strip()
        if line.startswith("{"):
            row = json.loads(line)
            rows[row["prompt"]] = row
    return rows


def run_native(args, texts_dir):
    """Runs the native example; returns (rows by prompt, order of prompts, its table)."""
    cmd = [NATIVE, "--json", "--dump-texts", texts_dir, "--sizes", args.sizes]
    cmd += ["--runs", str(args.runs)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True)
    rows = parse_lines(out.stdout)
    order = [json.loads(l)["prompt"] for l in out.stdout.splitlines() if l.startswith("{")]
    return rows, order, out.stderr


def run_wasm(args, work):
    """Runs the wasm example under Wasmtime; returns (rows by prompt, its table)."""
    import wasmtime

    engine = wasmtime.Engine()
    module = wasmtime.Module.from_file(engine, WASM)
    linker = wasmtime.Linker(engine)
    linker.define_wasi()
    # The filter's proxy-wasm host calls: linked so that the module instantiates, never
    # called by the benchmark's `_start`.
    for imp in module.imports:
        if imp.module != "wasi_snapshot_preview1" and isinstance(imp.type, wasmtime.FuncType):

            def trap(*_args, _name=imp.name):
                raise RuntimeError(f"host call {_name} is not available in the benchmark")

            linker.define_func(imp.module, imp.name, imp.type, trap)
    stdout = os.path.join(work, "wasm.stdout")
    stderr = os.path.join(work, "wasm.stderr")
    wasi = wasmtime.WasiConfig()
    wasi.argv = ["compression_bench", "--json", "--sizes", args.sizes, "--runs", str(args.runs)]
    wasi.stdout_file = stdout
    wasi.stderr_file = stderr
    store = wasmtime.Store(engine)
    store.set_wasi(wasi)
    instance = linker.instantiate(store, module)
    try:
        instance.exports(store)["_start"](store)
    except wasmtime.ExitTrap as e:
        if e.code != 0:
            raise
    with open(stdout, encoding="utf-8") as f:
        rows = parse_lines(f.read())
    with open(stderr, encoding="utf-8") as f:
        table = f.read()
    return rows, table


def ratio(a, b):
    return f"{a / b:.1f}x" if a and b else "-"


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="2000,8000,16000,32000", help="prompt sizes in tokens")
    ap.add_argument("--runs", type=int, default=15, help="native and wasm runs per prompt")
    ap.add_argument("--baseline-runs", type=int, default=3, help="baseline runs per prompt")
    ap.add_argument(
        "--baseline-max-seconds",
        type=float,
        default=10.0,
        help="stop repeating the baseline on a prompt after this long (at least one run)",
    )
    ap.add_argument("--envoy-runs", type=int, default=10, help="requests per prompt via Envoy")
    ap.add_argument("--no-envoy", action="store_true", help="skip the in-Envoy measurement")
    ap.add_argument(
        "--work", default=os.path.join(ROOT, "build/bench/compression"), help="scratch dir"
    )
    args = ap.parse_args()
    for path in (NATIVE, WASM):
        if not os.path.exists(path):
            sys.exit(f"compression_bench: {path} is missing; build it first (see --help)")
    ensure("wasmtime", "wasmtime")
    compression_baseline.ensure_summa()
    import wasmtime  # noqa: F401

    texts = os.path.join(args.work, "texts")
    os.makedirs(texts, exist_ok=True)

    native, order, native_table = run_native(args, texts)
    print(native_table.rstrip())
    print()
    wasm, wasm_table = run_wasm(args, args.work)

    envoy = {}
    envoy_note = "not measured (--no-envoy)"
    if not args.no_envoy:
        try:
            envoy = compression_envoy.measure(texts, order, args.envoy_runs, warmup=2)
            envoy_note = (
                f"median of {args.envoy_runs} requests after 2 warm-up, one Envoy worker, "
                "real daemon and models behind it"
            )
        except Exception as e:  # noqa: BLE001 -- the other columns stay useful
            envoy_note = f"not measured: {e}"

    wasmtime_version = getattr(wasmtime, "__version__", None)
    if wasmtime_version is None:
        try:
            from importlib.metadata import version

            wasmtime_version = version("wasmtime")
        except Exception:  # noqa: BLE001
            wasmtime_version = "?"

    rows = []
    for name in order:
        n = native[name]
        with open(os.path.join(texts, name + ".txt"), encoding="utf-8") as f:
            text = f.read()
        words = max(1, round(KEPT_TOKENS * len(text.split()) / max(1, n["tokens"])))
        times, _kept = compression_baseline.time_textrank(
            text, words, args.baseline_runs, args.baseline_max_seconds
        )
        rows.append((name, n, wasm.get(name, {}), envoy.get(name, {}), words, times))

    print(
        f"native: {os.uname().machine} release build, push_str (8 KiB chunks) + finish to a "
        f"512-token budget, median of {args.runs} runs (`finish`: the ranking and selection "
        "alone)"
    )
    print(
        f"Wasmtime: the same code and prompts built for wasm32-wasip1, Wasmtime "
        f"{wasmtime_version} (Cranelift), median of {args.runs} runs"
    )
    print(f"Envoy (V8): the filter's own scan + compress timing; {envoy_note}")
    print(
        f"baseline: summa TextRank (pure Python, PyPI) on the same texts, summary of "
        f"{KEPT_TOKENS} tokens' worth of words, median of up to {args.baseline_runs} runs "
        f"(fewer after {args.baseline_max_seconds:.0f} s)"
    )
    print()
    print(
        "| prompt | tokens | native ms | native finish ms | Wasmtime ms | Envoy V8 ms "
        "| Envoy finish ms | baseline ms (runs) | baseline ÷ native | baseline ÷ Envoy |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|")

    def f2(v):
        return "-" if v is None else f"{v:.2f}"

    for name, n, w, e, _words, times in rows:
        b = statistics.median(times)
        print(
            f"| {name} | {n['tokens']} | {f2(n['total_ms'])} | {f2(n['finish_ms'])} "
            f"| {f2(w.get('total_ms'))} | {f2(e.get('total_ms'))} | {f2(e.get('compress_ms'))} "
            f"| {b:.0f} ({len(times)}) | {ratio(b, n['total_ms'])} "
            f"| {ratio(b, e.get('total_ms'))} |"
        )


if __name__ == "__main__":
    main()
