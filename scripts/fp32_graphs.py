"""The fp32 ONNX graphs that model preparation (`prepare_models.py`) starts from.

  - `build_minilm_fp32`: a BERT encoder (MiniLM) rebuilt from its safetensors weights in
    the shape of a Hugging Face transformers eager export (opset 17): embeddings, per layer
    Q/K/V MatMul + Add, attention as MatMul, scale, mask Add, Softmax, MatMul, then the
    output projection, residual LayerNormalization and the exact (erf) GELU feed-forward;
    outputs `last_hidden_state` `[batch, seq, hidden]`.
  - `dequantize_model`: every `com.microsoft::MatMulNBits` node (4-bit blocked weights,
    per-block scales and zero points) replaced by a plain fp32 `MatMul` over the
    dequantized weights, so that the graph can be quantized again the daemon's way.

Both raise `PrepareError` for what they do not support.
"""
from __future__ import annotations

import collections
import math

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


class PrepareError(Exception):
    """A model that preparation cannot build or that fails a check."""


# ---------------------------------------------------------------- MiniLM fp32 graph


class GraphBuilder:
    """Small helper over onnx.helper: fresh names, initializers, nodes."""

    def __init__(self) -> None:
        self.nodes: list[onnx.NodeProto] = []
        self.inits: list[TensorProto] = []
        self.count = collections.Counter()

    def name(self, base: str) -> str:
        self.count[base] += 1
        n = self.count[base]
        return base if n == 1 else f"{base}_{n - 1}"

    def const(self, base: str, value: np.ndarray) -> str:
        name = self.name(base)
        self.inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def op(self, op_type: str, inputs: list[str], base: str, **attrs) -> str:
        out = self.name(f"{base}_output")
        self.nodes.append(
            helper.make_node(op_type, inputs, [out], name=self.name(base), **attrs)
        )
        return out


def build_minilm_fp32(weights: dict[str, np.ndarray], config: dict) -> onnx.ModelProto:
    """BERT encoder in the shape of a transformers eager export (opset 17)."""
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    head_dim = hidden // heads
    layers = config["num_hidden_layers"]
    eps = float(config.get("layer_norm_eps", 1e-12))
    if config.get("hidden_act", "gelu") != "gelu":
        raise PrepareError(f"unsupported activation {config.get('hidden_act')}")
    if config.get("position_embedding_type", "absolute") != "absolute":
        raise PrepareError("only absolute position embeddings are supported")

    g = GraphBuilder()
    f32 = lambda x: np.asarray(x, dtype=np.float32)  # noqa: E731
    w = lambda k: f32(weights[k])  # noqa: E731

    def linear(x: str, prefix: str, base: str) -> str:
        # torch Linear weight is [out, in]; the export multiplies by its transpose.
        wt = g.const(f"{prefix}.weight_T", np.ascontiguousarray(w(f"{prefix}.weight").T))
        b = g.const(f"{prefix}.bias", w(f"{prefix}.bias"))
        mm = g.op("MatMul", [x, wt], f"/{base}/MatMul")
        return g.op("Add", [b, mm], f"/{base}/Add")

    def layer_norm(x: str, prefix: str, base: str) -> str:
        scale = g.const(f"{prefix}.weight", w(f"{prefix}.weight"))
        bias = g.const(f"{prefix}.bias", w(f"{prefix}.bias"))
        return g.op(
            "LayerNormalization", [x, scale, bias], f"/{base}/LayerNorm", axis=-1, epsilon=eps
        )

    # Embeddings: word + position (slice of the position-id buffer) + token type.
    word = g.op(
        "Gather",
        [g.const("embeddings.word_embeddings.weight", w("embeddings.word_embeddings.weight")), "input_ids"],
        "/embeddings/word_embeddings/Gather",
    )
    shape = g.op("Shape", ["input_ids"], "/embeddings/Shape")
    seq = g.op("Gather", [shape, g.const("/embeddings/one", np.array(1, np.int64))], "/embeddings/Gather", axis=0)
    seq1 = g.op("Unsqueeze", [seq, g.const("/embeddings/axes0", np.array([0], np.int64))], "/embeddings/Unsqueeze")
    pos_ids = weights.get("embeddings.position_ids")
    if pos_ids is None:
        pos_ids = np.arange(config["max_position_embeddings"], dtype=np.int64)[None, :]
    positions = g.op(
        "Slice",
        [
            g.const("embeddings.position_ids", np.asarray(pos_ids, np.int64)),
            g.const("/embeddings/starts", np.array([0], np.int64)),
            seq1,
            g.const("/embeddings/axes1", np.array([1], np.int64)),
            g.const("/embeddings/steps", np.array([1], np.int64)),
        ],
        "/embeddings/Slice",
    )
    pos = g.op(
        "Gather",
        [g.const("embeddings.position_embeddings.weight", w("embeddings.position_embeddings.weight")), positions],
        "/embeddings/position_embeddings/Gather",
    )
    types = g.op(
        "Gather",
        [g.const("embeddings.token_type_embeddings.weight", w("embeddings.token_type_embeddings.weight")), "token_type_ids"],
        "/embeddings/token_type_embeddings/Gather",
    )
    x = g.op("Add", [word, types], "/embeddings/Add")
    x = g.op("Add", [x, pos], "/embeddings/Add")
    x = layer_norm(x, "embeddings.LayerNorm", "embeddings")

    # Extended attention mask: (1 - mask[:, None, None, :]) * finfo(float32).min.
    m = g.op("Unsqueeze", ["attention_mask", g.const("/mask/axes", np.array([1, 2], np.int64))], "/mask/Unsqueeze")
    m = g.op("Cast", [m], "/mask/Cast", to=TensorProto.FLOAT)
    m = g.op("Sub", [g.const("/mask/one", f32(1.0)), m], "/mask/Sub")
    mask = g.op("Mul", [m, g.const("/mask/min", f32(np.finfo(np.float32).min))], "/mask/Mul")

    split_shape = g.const("/attention/split_shape", np.array([0, 0, heads, head_dim], np.int64))
    merge_shape = g.const("/attention/merge_shape", np.array([0, 0, hidden], np.int64))
    sqrt_d = g.const("/attention/sqrt_head_dim", f32(math.sqrt(head_dim)))
    sqrt2 = g.const("/gelu/sqrt2", f32(math.sqrt(2.0)))
    one = g.const("/gelu/one", f32(1.0))
    half = g.const("/gelu/half", f32(0.5))

    for i in range(layers):
        p = f"encoder.layer.{i}"
        b = f"encoder/layer.{i}"
        q = linear(x, f"{p}.attention.self.query", f"{b}/attention/self/query")
        k = linear(x, f"{p}.attention.self.key", f"{b}/attention/self/key")
        v = linear(x, f"{p}.attention.self.value", f"{b}/attention/self/value")
        sb = f"/{b}/attention/self"
        q = g.op("Reshape", [q, split_shape], f"{sb}/Reshape")
        q = g.op("Transpose", [q], f"{sb}/Transpose", perm=[0, 2, 1, 3])
        k = g.op("Reshape", [k, split_shape], f"{sb}/Reshape")
        kt = g.op("Transpose", [k], f"{sb}/Transpose", perm=[0, 2, 3, 1])
        v = g.op("Reshape", [v, split_shape], f"{sb}/Reshape")
        v = g.op("Transpose", [v], f"{sb}/Transpose", perm=[0, 2, 1, 3])
        s = g.op("MatMul", [q, kt], f"{sb}/MatMul")
        s = g.op("Div", [s, sqrt_d], f"{sb}/Div")
        s = g.op("Add", [s, mask], f"{sb}/Add")
        s = g.op("Softmax", [s], f"{sb}/Softmax", axis=-1)
        ctx = g.op("MatMul", [s, v], f"{sb}/MatMul")
        ctx = g.op("Transpose", [ctx], f"{sb}/Transpose", perm=[0, 2, 1, 3])
        ctx = g.op("Reshape", [ctx, merge_shape], f"{sb}/Reshape")
        a = linear(ctx, f"{p}.attention.output.dense", f"{b}/attention/output/dense")
        a = g.op("Add", [a, x], f"/{b}/attention/output/Add")
        x = layer_norm(a, f"{p}.attention.output.LayerNorm", f"{b}/attention/output")
        h = linear(x, f"{p}.intermediate.dense", f"{b}/intermediate/dense")
        gb = f"/{b}/intermediate/intermediate_act_fn"
        e = g.op("Div", [h, sqrt2], f"{gb}/Div")
        e = g.op("Erf", [e], f"{gb}/Erf")
        e = g.op("Add", [e, one], f"{gb}/Add")
        h = g.op("Mul", [h, e], f"{gb}/Mul")
        h = g.op("Mul", [h, half], f"{gb}/Mul")
        o = linear(h, f"{p}.output.dense", f"{b}/output/dense")
        o = g.op("Add", [o, x], f"/{b}/output/Add")
        x = layer_norm(o, f"{p}.output.LayerNorm", f"{b}/output")

    g.nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"], name="/output/Identity"))
    ids = lambda n: helper.make_tensor_value_info(n, TensorProto.INT64, ["batch", "sequence"])  # noqa: E731
    graph = helper.make_graph(
        g.nodes,
        "minilm_fp32",
        [ids("input_ids"), ids("attention_mask"), ids("token_type_ids")],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["batch", "sequence", hidden])],
        initializer=g.inits,
    )
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17)], producer_name="semroute-prepare"
    )
    model.ir_version = 8
    onnx.checker.check_model(model, full_check=True)
    return model


# ---------------------------------------------------------------- MatMulNBits -> MatMul


def dequantize_matmulnbits(
    node: onnx.NodeProto, inits: dict[str, TensorProto]
) -> tuple[np.ndarray, np.ndarray | None]:
    """fp32 `[K, N]` weight (and bias, if any) of one MatMulNBits node."""
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    k, n, bits, block = attrs["K"], attrs["N"], attrs["bits"], attrs["block_size"]
    if bits not in (2, 4, 8):
        raise PrepareError(f"{node.name}: {bits}-bit weights are not supported")

    def arr(i: int) -> np.ndarray | None:
        if len(node.input) <= i or not node.input[i]:
            return None
        if node.input[i] not in inits:
            raise PrepareError(f"{node.name}: input {i} ({node.input[i]}) is not an initializer")
        return numpy_helper.to_array(inits[node.input[i]])

    if arr(4) is not None:
        raise PrepareError(f"{node.name}: g_idx (act-order) is not supported")
    n_blocks = (k + block - 1) // block
    per_byte = 8 // bits
    mask = (1 << bits) - 1

    def unpack(packed: np.ndarray, count: int) -> np.ndarray:
        # Low bits first within each byte.
        packed = packed.astype(np.uint8)
        parts = [(packed >> (bits * j)) & mask for j in range(per_byte)]
        out = np.stack(parts, axis=-1).reshape(packed.shape[0], -1)
        return out[:, :count].astype(np.float32)

    b = arr(1)
    if b is None or b.dtype != np.uint8:
        raise PrepareError(f"{node.name}: B is not uint8")
    q = unpack(b.reshape(n, -1), n_blocks * block)  # [N, n_blocks * block]
    scales = arr(2).astype(np.float32).reshape(n, n_blocks)
    zp = arr(3)
    if zp is None:
        zero = np.full((n, n_blocks), float(1 << (bits - 1)), np.float32)
    elif zp.dtype == np.uint8:
        zero = unpack(zp.reshape(n, -1), n_blocks)
    else:
        zero = zp.astype(np.float32).reshape(n, n_blocks)
    w = (q.reshape(n, n_blocks, block) - zero[:, :, None]) * scales[:, :, None]
    w = w.reshape(n, n_blocks * block)[:, :k]  # pad columns beyond K dropped
    bias = arr(5)
    return np.ascontiguousarray(w.T.astype(np.float32)), bias


def dequantize_model(model: onnx.ModelProto) -> tuple[onnx.ModelProto, int]:
    g = model.graph
    inits = {t.name: t for t in g.initializer}
    new_nodes = []
    replaced = 0
    dropped: set[str] = set()
    for node in g.node:
        if node.op_type != "MatMulNBits" or node.domain != "com.microsoft":
            new_nodes.append(node)
            continue
        w, bias = dequantize_matmulnbits(node, inits)
        wname = node.input[1] + "_fp32"
        g.initializer.append(numpy_helper.from_array(w, wname))
        dropped.update(i for i in node.input[1:] if i)
        base = node.name or node.output[0]
        if bias is None:
            new_nodes.append(helper.make_node("MatMul", [node.input[0], wname], [node.output[0]], name=base))
        else:
            bname = node.input[5] + "_fp32"
            g.initializer.append(numpy_helper.from_array(bias.astype(np.float32), bname))
            mm = node.output[0] + "_matmul"
            new_nodes.append(helper.make_node("MatMul", [node.input[0], wname], [mm], name=base))
            new_nodes.append(helper.make_node("Add", [mm, bname], [node.output[0]], name=base + "_bias"))
        replaced += 1
    del g.node[:]
    g.node.extend(new_nodes)
    still_used = {i for n in g.node for i in n.input}
    keep = [t for t in g.initializer if t.name not in dropped or t.name in still_used]
    del g.initializer[:]
    g.initializer.extend(keep)
    if not any(n.domain == "com.microsoft" for n in g.node):
        ops = [o for o in model.opset_import if o.domain != "com.microsoft"]
        del model.opset_import[:]
        model.opset_import.extend(ops)
    onnx.checker.check_model(model)
    return model, replaced
