#!/usr/bin/env python3
"""Trains the router's second scorers: logistic regressions on hashed n-grams.

The router encoder reads a text through MiniLM's English WordPiece vocabulary and a
pooled vector; the same templates, payload spellings, subject vocabulary and
multilingual injections leave a plainer trace in the text's bytes. These models read
those, one per signal (`--task`):

  jailbreak  binary: the daemon adds its logit to the encoder's jailbreak log-odds
             (`models.jailbreak.ngrams`; calib split: AUC 0.975 for the encoder alone,
             0.983 for the sum);
  domain     14 classes: the daemon adds its logits to the encoder's log-probabilities
             (`models.domain.ngrams`; MMLU-Pro's calib bucket, held out of both models'
             training for the measurement (`--domain-calib` here and in
             train_classifiers.py, then eval_classifiers.py --split calib --domain-calib
             with and without `models.domain.ngrams`): accuracy 0.830 for the encoder
             alone, 0.800 for this model alone, 0.840 for the sum). Both models learned
             the training pool's label frequencies, which the sum counts twice; the
             stored bias takes them out twice and puts MMLU-Pro's own in their place
             (`label_prior_shift`), so that the sum is a product of the two models'
             evidence under the categories' frequencies in MMLU-Pro.

Features (`features`; the daemon's `models::ngrams` computes the same indices):
  - the text as UTF-8 bytes, ASCII letters lowercased, every run of ASCII whitespace
    (space, \\t, \\n, \\r, \\v, \\f) one space, no space at either end, then one space
    added at each end;
  - every byte 3-, 4- and 5-gram of that; every word (a maximal run of [a-z0-9], or
    of bytes >= 0x80) and every pair of neighbouring words;
  - each hashed with 64-bit FNV-1a (Fowler, Noll, Vo) over one tag byte (the n-gram's
    length; 1 for a word, 2 for a pair, whose words are joined by one space) and the
    bytes; the index is the hash's top `bits` bits; each index counts once.
logits[c] = (sum of weight[i, c] over the indices i) / sqrt(number of indices) + bias[c].

Data: the router encoder's training split (`router_data.py`: licences that allow
redistributing derived weights only; the calib and val splits never train).
  jailbreak: jailbreak rows as the filter sends them (its compressor and risk scan, as
             `eval_classifiers.py`; the project's own ordinary requests in 15 languages,
             `data/multilingual_requests.jsonl`, and ordinary follow-ups of a
             conversation, `data/followup_requests.jsonl`, among them), MMLU and MMLU-Pro questions as benign at weight
             0.2, jailbreaks weighted to 0.6 of the benign weight;
  domain:    the MMLU and MMLU-Pro questions with their 14 categories, unweighted.
Adam (lr 0.05), 4 epochs, batches of 256, fixed seeds, one thread count: the weights
are reproducible.

Outputs in `--out` (default models/ngrams/), per task:
  TASK.safetensors     `weight` [2^bits] fp32 (jailbreak) or [2^bits, 14] fp16 (domain),
                       `bias` [classes] fp32; metadata: bits, version, labels (domain)
  TASK.reference.json  logits on models/check_texts.txt, which the daemon's tests
                       compare its own features and sums with
  TASK.training.json   data counts per source / subset / licence, settings, losses
  SHA256SUMS           of every task's files (`make setup` checks them)

  build/venv/bin/python scripts/train_ngrams.py --task jailbreak --eval-dir ../shared/eval
  build/venv/bin/python scripts/train_ngrams.py --task domain --eval-dir ../shared/eval
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import math
import os
import re
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import router_data as data  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BITS = 18
ORDERS = (3, 4, 5)
TAG_WORD, TAG_PAIR = 1, 2
FNV_OFFSET = 0xCBF29CE484222325
FNV_PRIME = 0x100000001B3
_WS = re.compile(rb"[ \t\n\r\x0b\x0c]+")
_WORD = re.compile(rb"[a-z0-9]+|[\x80-\xff]+")


def normalized(text: str) -> bytes:
    """The bytes the n-grams are taken from (see the module doc)."""
    return b" " + _WS.sub(b" ", text.encode("utf-8").lower()).strip(b" ") + b" "


def _fnv_rows(tag: int, rows: np.ndarray) -> np.ndarray:
    """FNV-1a 64 of [tag] + each row of `rows` ([k, n] uint8), vectorised over rows."""
    prime = np.uint64(FNV_PRIME)
    h = np.full(rows.shape[0], np.uint64(FNV_OFFSET), dtype=np.uint64)
    with np.errstate(over="ignore"):
        h = (h ^ np.uint64(tag)) * prime
        for j in range(rows.shape[1]):
            h = (h ^ rows[:, j].astype(np.uint64)) * prime
    return h


def fnv1a(tag: int, b: bytes) -> int:
    h = FNV_OFFSET
    for x in bytes([tag]) + b:
        h = ((h ^ x) * FNV_PRIME) & 0xFFFFFFFFFFFFFFFF
    return h


def features(text: str, bits: int = BITS) -> np.ndarray:
    """Sorted distinct feature indices of `text`, int64."""
    b = normalized(text)
    a = np.frombuffer(b, dtype=np.uint8)
    hashes = []
    for n in ORDERS:
        if len(a) >= n:
            hashes.append(_fnv_rows(n, np.lib.stride_tricks.sliding_window_view(a, n)))
    words = _WORD.findall(b)
    pairs = [words[i] + b" " + words[i + 1] for i in range(len(words) - 1)]
    hw = [fnv1a(TAG_WORD, w) for w in words] + [fnv1a(TAG_PAIR, p) for p in pairs]
    if hw:
        hashes.append(np.array(hw, dtype=np.uint64))
    if not hashes:
        return np.zeros(0, dtype=np.int64)
    return np.unique((np.concatenate(hashes) >> np.uint64(64 - bits)).astype(np.int64))


def logits(weight: np.ndarray, bias: np.ndarray, text: str, bits: int) -> np.ndarray:
    """`[classes]` logits of `text`; `weight` [2^bits, classes], `bias` [classes]."""
    f = features(text, bits)
    return weight[f].astype(np.float64).sum(0) / math.sqrt(max(len(f), 1)) + bias.astype(np.float64)


def training_rows(eval_dir: str, task: str,
                  domain_calib: bool = False) -> tuple[list[str], np.ndarray, np.ndarray, list[dict]]:
    """Texts, labels (class indices), weights and source rows of the training split
    (see the module doc); `domain_calib` keeps MMLU-Pro's calib bucket out of them."""
    rows = data.all_rows(eval_dir, domain_calib=domain_calib)
    dom = [r for r in rows if r["split"] == "train" and r["task"] == "domain"]
    if task == "domain":
        y = np.array([r["domain"] for r in dom], dtype=np.int64)
        return [r["text"] for r in dom], y, np.ones(len(dom), dtype=np.float32), dom
    from eval_classifiers import FILTER_CONFIG, filter_view

    jb = [r for r in rows if r["split"] == "train" and r["task"] == "jailbreak"]
    view, _ = filter_view(jb, dict(FILTER_CONFIG.get("compression", {})))
    texts = [v["text"] for v in view] + [r["text"] for r in dom]
    y = np.array([r["jailbreak"] for r in jb] + [0] * len(dom), dtype=np.int64)
    w = np.array([1.0] * len(jb) + [0.2] * len(dom), dtype=np.float32)
    pos = y == 1
    w[pos] *= w[~pos].sum() / w[pos].sum() * 0.6
    return texts, y, w, jb + dom


def label_prior_shift(rows: list[dict], classes: int) -> np.ndarray:
    """`[classes]` ln(pi_target) - 2 ln(pi_train), added to the domain model's bias.

    The daemon sums the encoder head's log-probabilities and this model's logits, and
    takes the softmax: a product of two posteriors, each holding the training pool's
    label frequencies pi_train (MMLU's questions, imbalanced towards `other`, philosophy,
    law and health, with MMLU-Pro's). A product of experts counts the prior once
    (p(y|a,b) ~ p(y|a) p(y|b) / pi(y) for conditionally independent readings), and the
    questions the router is judged on are MMLU-Pro's, whose frequencies pi_target are
    those of the MMLU-Pro rows of the same training split. Counts with one added; only
    training rows are read."""
    def freq(sel) -> np.ndarray:
        n = np.ones(classes)
        for r in sel:
            n[r["domain"]] += 1
        return n / n.sum()

    pi_train = freq(rows)
    pi_target = freq([r for r in rows if r["source"] == "mmlu_pro"])
    return np.log(pi_target) - 2 * np.log(pi_train)


def train(texts, y, w, classes: int, bits: int, epochs: int, seed: int,
          threads: int) -> tuple[np.ndarray, np.ndarray, list[float]]:
    """`weight` [2^bits, classes] and `bias` [classes]: binary cross-entropy on one
    logit where `classes` is 1, softmax cross-entropy otherwise; both weighted by `w`."""
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(threads)
    torch.use_deterministic_algorithms(True)
    feats = [features(t, bits) for t in texts]

    def bag(fs):
        offsets = np.cumsum([0] + [len(f) for f in fs[:-1]])
        scale = np.concatenate([np.full(len(f), 1 / math.sqrt(max(len(f), 1)), dtype=np.float32) for f in fs])
        return (torch.from_numpy(np.concatenate(fs)), torch.from_numpy(offsets), torch.from_numpy(scale))

    emb = torch.nn.EmbeddingBag(1 << bits, classes, mode="sum")
    torch.nn.init.zeros_(emb.weight)
    b = torch.zeros(classes, requires_grad=True)
    opt = torch.optim.Adam(list(emb.parameters()) + [b], lr=0.05)
    rng = np.random.default_rng(seed)
    losses = []
    for _ in range(epochs):
        perm, total = rng.permutation(len(feats)), 0.0
        for s in range(0, len(feats), 256):
            ix = perm[s:s + 256]
            ids, off, scale = bag([feats[i] for i in ix])
            z = emb(ids, off, per_sample_weights=scale) + b
            yy, ww = torch.from_numpy(y[ix]), torch.from_numpy(w[ix])
            if classes == 1:
                each = torch.nn.functional.binary_cross_entropy_with_logits(z[:, 0], yy.float(), reduction="none")
            else:
                each = torch.nn.functional.cross_entropy(z, yy, reduction="none")
            loss = (each * ww).sum() / ww.sum()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(ix)
        losses.append(round(total / len(feats), 6))
        print(f"epoch {len(losses)}: loss {losses[-1]}", flush=True)
    return emb.weight.detach().numpy().copy(), b.detach().numpy().copy(), losses


# Per task: classes, default bits, the weight's stored dtype (the domain table is
# 14 times the jailbreak one per bucket; fp16 keeps it at 1.8 MB).
TASKS = {
    "jailbreak": {"labels": None, "bits": BITS, "dtype": np.float32},
    "domain": {"labels": data.DOMAIN_LABELS, "bits": 16, "dtype": np.float16},
}
FILES = ("safetensors", "reference.json", "training.json")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--task", choices=sorted(TASKS), default="jailbreak")
    ap.add_argument("--eval-dir", default=os.path.join(ROOT, "..", "shared", "eval"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models", "ngrams"))
    ap.add_argument("--bits", type=int, choices=range(10, 25), metavar="10..24",
                    help="table size 2^bits (default: 18 for jailbreak, 16 for domain)")
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--domain-calib", action="store_true",
                    help="keep MMLU-Pro's calib bucket out of training (as train_classifiers.py "
                         "--domain-calib), for choices on it with eval_classifiers.py --split calib "
                         "--domain-calib; the shipped models train on it")
    args = ap.parse_args()
    from safetensors.numpy import save_file

    t0 = time.time()
    spec = TASKS[args.task]
    bits = args.bits or spec["bits"]
    labels = spec["labels"]
    classes = len(labels) if labels else 1
    texts, y, w, rows = training_rows(args.eval_dir, args.task, args.domain_calib)
    weight, bias, losses = train(texts, y, w, classes, bits, args.epochs, args.seed, args.threads)
    shift = label_prior_shift(rows, classes) if labels else None
    if shift is not None:
        bias = bias + shift.astype(np.float32)
    # What is served (and what the reference logits are computed from): the stored dtype.
    weight = weight.astype(spec["dtype"])
    os.makedirs(args.out, exist_ok=True)
    version = f"{args.task}-ngrams-{bits}bit-seed{args.seed}"
    metadata = {"bits": str(bits), "version": version}
    if labels:
        metadata["labels"] = json.dumps(labels)
    path = lambda ext: os.path.join(args.out, f"{args.task}.{ext}")  # noqa: E731
    save_file({"weight": weight if labels else weight[:, 0].copy(), "bias": bias.astype(np.float32)},
              path("safetensors"), metadata=metadata)
    with open(os.path.join(ROOT, "models", "check_texts.txt"), "rb") as f:
        checks = [line for line in f.read().decode("utf-8").split("\n") if line.strip()]
    reference = {"version": version, "bits": bits, "labels": labels,
                 "outputs": [{"text": t, "features": int(len(features(t, bits))),
                              "logits": [round(float(v), 6) for v in logits(weight, bias, t, bits)]}
                             for t in checks]}
    if labels:
        counts = collections.Counter((r["source"], r["subset"], r["license"], labels[r["domain"]]) for r in rows)
        settings = {"label_prior_shift": {lab: round(float(v), 6) for lab, v in zip(labels, shift)}}
    else:
        counts = collections.Counter((r["source"], r["subset"], r["license"], data.JAILBREAK_LABELS[r["jailbreak"]])
                                     for r in rows)
        settings = {"question_weight": 0.2, "positive_share": 0.6}
    training = {
        "version": version,
        "settings": {"task": args.task, "bits": bits, "orders": list(ORDERS), "epochs": args.epochs,
                     "seed": args.seed, "threads": args.threads, "lr": 0.05, "batch": 256,
                     "domain_calib": args.domain_calib, **settings},
        "rows": len(rows),
        "data": [{"source": s, "subset": sub, "license": lic, "label": lab, "rows": n}
                 for (s, sub, lic, lab), n in sorted(counts.items(), key=lambda kv: tuple(map(str, kv[0])))],
        "losses": losses,
        "seconds": round(time.time() - t0, 1),
    }
    for ext, obj in (("reference.json", reference), ("training.json", training)):
        with open(path(ext), "w", encoding="utf-8") as f:
            json.dump(obj, f, indent=1, ensure_ascii=False)
            f.write("\n")
    with open(os.path.join(args.out, "SHA256SUMS"), "w") as f:
        for task in sorted(TASKS):
            for ext in FILES:
                name = f"{task}.{ext}"
                if os.path.exists(os.path.join(args.out, name)):
                    with open(os.path.join(args.out, name), "rb") as g:
                        f.write(f"{hashlib.sha256(g.read()).hexdigest()}  {name}\n")
    print(f"wrote {args.task} to {args.out} in {time.time() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
