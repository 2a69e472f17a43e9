#!/usr/bin/env python3
"""Train and evaluate the linear heads on the shared MiniLM encoder.

Embeddings come from `semroute-daemon embed`, i.e. exactly the pooled vectors
the daemon feeds its heads at serving time. Heads are multinomial logistic
regression (softmax, L2-regularised, full-batch Adam), written as the JSON
files the daemon loads (`models/heads/*.json`).

  python3 scripts/heads.py train --eval-dir ../shared/eval   # writes models/heads/
  python3 scripts/heads.py eval  --eval-dir ../shared/eval   # k-fold scores

Data (never copied into the repository):
  domain:    domain/mmlu_pro_train.jsonl (MMLU-Pro questions, MMLU-Pro labels);
             domain/mmlu_mapped_60_per_category.jsonl is reported as an
             external MMLU test.
  jailbreak: jailbreak/jailbreak_vs_benign.jsonl, scored per subset beside a
             length-only baseline (the set has a strong length shortcut);
             plus academic passages, questions and single sentences from
             domain/mmlu_train.jsonl (MMLU questions not in MMLU-Pro) as
             benign text, and a false-alarm check on passages and sentences
             of MMLU-Pro questions, the text long prompts of the compression
             eval are made of.
"""
import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import time
import tomllib

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DOMAIN_LABELS = [
    "biology", "business", "chemistry", "computer science", "economics", "engineering", "health",
    "history", "law", "math", "other", "philosophy", "physics", "psychology",
]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def daemon_bin():
    for p in (os.environ.get("SEMROUTE_DAEMON_BIN"), os.path.join(ROOT, "target/release/semroute-daemon")):
        if p and os.path.exists(p):
            return p
    sys.exit("semroute-daemon not built: run `make build` first")


# Headline metrics of `eval`, for `--summary`.
SUMMARY = {}

# Daemon configuration the embeddings come from (`--config`; None: the daemon's default).
CONFIG = None


def encoder_identity():
    """What the embeddings depend on besides the texts: the configuration's text and the
    encoder graph it names (size and modification time), so a prepared model rebuilt by
    `make setup` or another configuration never reads stale cached embeddings."""
    path = CONFIG or os.path.join(ROOT, "config/daemon.toml")
    with open(path, "rb") as f:
        text = f.read()
    encoder_dir = tomllib.loads(text.decode()).get("models", {}).get("encoder_dir", "build/models/prepared/minilm")
    model = os.path.join(ROOT, encoder_dir, "model.onnx")
    st = os.stat(model) if os.path.exists(model) else None
    return text + repr((model, st and st.st_size, st and st.st_mtime_ns)).encode()


def embed(rows, cache_dir):
    """Pooled encoder embeddings [n, 384] for rows' "text", cached by content hash."""
    payload = "".join(json.dumps({"text": r["text"]}, ensure_ascii=False) + "\n" for r in rows)
    key = hashlib.sha256(payload.encode() + encoder_identity()).hexdigest()[:16]
    os.makedirs(cache_dir, exist_ok=True)
    out = os.path.join(cache_dir, f"emb-{key}.f32")
    if not os.path.exists(out):
        inp = os.path.join(cache_dir, f"in-{key}.jsonl")
        with open(inp, "w", encoding="utf-8") as f:
            f.write(payload)
        config = ["--config", CONFIG] if CONFIG else []
        subprocess.run([daemon_bin(), "embed", *config, "--input", inp, "--output", out + ".tmp"], check=True, cwd=ROOT)
        os.replace(out + ".tmp", out)
        os.remove(inp)
    x = np.fromfile(out, dtype="<f4")
    return x.reshape(len(rows), -1)


def normalize(x):
    n = np.linalg.norm(x, axis=1, keepdims=True)
    return x / np.maximum(n, 1e-12)


def fit_softmax(x, y, n_classes, l2=1e-4, epochs=400, lr=0.05, class_weight=None, seed=0, sample_weight=None):
    """Multinomial logistic regression by full-batch Adam. x: [n, d], y: [n] ints."""
    rng = np.random.default_rng(seed)
    n, d = x.shape
    w = rng.normal(0, 0.01, size=(n_classes, d)).astype(np.float64)
    b = np.zeros(n_classes)
    onehot = np.eye(n_classes)[y]
    if sample_weight is not None:
        sw = np.asarray(sample_weight, dtype=np.float64)
    else:
        sw = np.ones(n) if class_weight is None else class_weight[y]
    sw = sw / sw.sum()
    mw, vw, mb, vb = np.zeros_like(w), np.zeros_like(w), np.zeros_like(b), np.zeros_like(b)
    b1, b2, eps = 0.9, 0.999, 1e-8
    for t in range(1, epochs + 1):
        z = x @ w.T + b
        z -= z.max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        g = (p - onehot) * sw[:, None]
        gw = g.T @ x + l2 * w
        gb = g.sum(axis=0)
        mw = b1 * mw + (1 - b1) * gw
        vw = b2 * vw + (1 - b2) * gw * gw
        mb = b1 * mb + (1 - b1) * gb
        vb = b2 * vb + (1 - b2) * gb * gb
        w -= lr * (mw / (1 - b1**t)) / (np.sqrt(vw / (1 - b2**t)) + eps)
        b -= lr * (mb / (1 - b1**t)) / (np.sqrt(vb / (1 - b2**t)) + eps)
    return w, b


def predict_proba(w, b, x):
    z = x @ w.T + b
    z -= z.max(axis=1, keepdims=True)
    p = np.exp(z)
    return p / p.sum(axis=1, keepdims=True)


def balanced_weights(y, n_classes):
    counts = np.bincount(y, minlength=n_classes).astype(np.float64)
    return counts.sum() / (n_classes * np.maximum(counts, 1))


def kfold_indices(n, k, seed=0):
    idx = np.random.default_rng(seed).permutation(n)
    return [idx[i::k] for i in range(k)]


def macro_f1(y, pred, n_classes):
    f1s = []
    for c in range(n_classes):
        tp = np.sum((pred == c) & (y == c))
        fp = np.sum((pred == c) & (y != c))
        fn = np.sum((pred != c) & (y == c))
        f1s.append(0.0 if tp == 0 else 2 * tp / (2 * tp + fp + fn))
    return float(np.mean(f1s))


def roc_auc(y, s):
    """Area under the ROC curve (rank statistic, ties averaged)."""
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    i = 0
    while i < len(s):
        j = i
        while j + 1 < len(s) and sorted_s[j + 1] == sorted_s[i]:
            j += 1
        ranks[order[i:j + 1]] = (i + j) / 2 + 1
        i = j + 1
    pos = y == 1
    n_pos, n_neg = pos.sum(), (~pos).sum()
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def threshold_at_fpr(neg, fpr):
    """The score above which at most a share `fpr` of the negatives `neg` lie: the
    (floor(fpr * n) + 1)-th highest negative score (-inf when that is past the last);
    NaN without negatives. What scores above it counts as positive."""
    neg = np.sort(np.asarray(neg))[::-1]
    if len(neg) == 0:
        return float("nan")
    k = int(np.floor(fpr * len(neg)))
    return float(neg[k]) if k < len(neg) else -np.inf


def recall_at_fpr(y, s, fpr):
    thr = threshold_at_fpr(s[y == 0], fpr)
    if np.isnan(thr):
        return float("nan")
    return float(np.mean(s[y == 1] > thr))


def head_json(name, labels, w, b, version):
    return {
        "name": name,
        "version": version,
        "labels": labels,
        "normalize": True,
        "weights": [[round(float(v), 6) for v in row] for row in w],
        "bias": [round(float(v), 6) for v in b],
    }


DOMAIN_L2 = 1e-4
JB_L2 = 1e-3


def domain_data(eval_dir, cache):
    rows = read_jsonl(os.path.join(eval_dir, "domain/mmlu_pro_train.jsonl"))
    rows = [r for r in rows if r["label"] in DOMAIN_LABELS]
    y = np.array([DOMAIN_LABELS.index(r["label"]) for r in rows])
    return normalize(embed(rows, cache).astype(np.float64)), y, rows


def jailbreak_data(eval_dir, cache):
    rows = read_jsonl(os.path.join(eval_dir, "jailbreak/jailbreak_vs_benign.jsonl"))
    y = np.array([1 if r["label"] == "jailbreak" else 0 for r in rows])
    return normalize(embed(rows, cache).astype(np.float64)), y, rows


# Self-written prompts shaped like everyday API traffic (short instructions,
# format constraints, tool and file requests, benign uses of words such as
# "ignore", "pretend", "system prompt") and short injections, added to every
# jailbreak training set: the public sets have few short benign requests, so
# without them short everyday prompts score high.
EXTRA_JB = os.path.join(ROOT, "models/heads/jailbreak_extra_training.jsonl")
EXTRA_WEIGHT = 3.0


def jailbreak_extra(cache):
    rows = read_jsonl(EXTRA_JB)
    y = np.array([1 if r["label"] == "jailbreak" else 0 for r in rows])
    return normalize(embed(rows, cache).astype(np.float64)), y


def passages(texts, seed, min_words=120, max_words=220):
    """Exam questions joined into passages of about one encoder window (254 tokens is
    about 190 words), the way they sit in a long pasted prompt."""
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(texts))
    out, cur, words, target = [], [], 0, int(rng.integers(min_words, max_words))
    for i in order:
        t = texts[i]
        cur.append(t)
        words += len(t.split())
        if words >= target:
            out.append("\n\n".join(cur))
            cur, words, target = [], 0, int(rng.integers(min_words, max_words))
    return out


# Long prompts are classified in 254-token windows and the riskiest window
# wins, so a head that fires on a few percent of ordinary windows fires on most
# long prompts. Exam questions (law, logic, ethics) were the worst: about 5% of
# windows of MMLU-Pro questions scored above the 0.8 threshold. Passages and
# single questions from MMLU rows that are not in MMLU-Pro are added as benign
# text (MMLU-Pro, the compression eval's filler, stays unseen), at a small
# weight per example: at 0.05 the share of MMLU-Pro passages above 0.8 fell
# from 1.8% to 0 (above 0.5: from 19% to 1.2%) for a cross-validated AUC of
# 0.979 instead of 0.982; at 1.0 the AUC fell to 0.961.
#
# The daemon also scores single sentences of a long prompt (window refinement),
# so single sentences cut from the same MMLU questions are added too: lead-ins
# such as "The following message was sent by ...:" scored up to 0.85 alone.
# With 3,000 sentences the share of 3,000 MMLU-Pro sentences above 0.5 fell
# from 1.9% to 0.9% (above 0.8: 2 both times), and that lead-in from 0.85 to
# 0.76, for a cross-validated AUC of 0.977 instead of 0.979. In the compression
# eval (3 seeds and one more filler, 288 long prompts) jailbreak agreement with
# and without compression rose from 0.976 to 0.990; benign prompts blocked
# whole fell from 3 of 95 to 0, and jailbreaks caught fell from 121 to 116 of
# 193 whole and from 119 to 117 compressed, all of them scored 0.80-0.83 before.
ACADEMIC_WEIGHT = 0.05
ACADEMIC_SINGLES = 1000
ACADEMIC_SENTENCES = 3000
SENTENCE_END = re.compile(r"(?<=[.?!:;])\s+")


def sentences(texts, seed, n, min_words=3):
    """Up to `n` distinct sentences of at least `min_words` words cut from `texts`
    (split at line breaks and after . ? ! : ;), in a seeded random order."""
    out = []
    for t in texts:
        for line in t.split("\n"):
            out += [s.strip() for s in SENTENCE_END.split(line) if len(s.split()) >= min_words]
    order = np.random.default_rng(seed).permutation(len(out))
    return list(dict.fromkeys(out[i] for i in order))[:n]


def academic_negatives(eval_dir, cache):
    rows = read_jsonl(os.path.join(eval_dir, "domain/mmlu_train.jsonl"))
    texts = [r["text"] for r in rows if not r.get("in_mmlu_pro", True)]
    rng = np.random.default_rng(1)
    singles = [texts[i] for i in rng.permutation(len(texts))[:ACADEMIC_SINGLES]]
    cut = sentences(texts, seed=5, n=ACADEMIC_SENTENCES)
    batch = [{"text": t} for t in passages(texts, seed=2) + singles + cut]
    return normalize(embed(batch, cache).astype(np.float64))


def mmlu_pro_sentences(eval_dir, cache, n=3000):
    rows = read_jsonl(os.path.join(eval_dir, "domain/mmlu_pro_train.jsonl"))
    ss = sentences([r["text"] for r in rows], seed=6, n=n)
    return normalize(embed([{"text": t} for t in ss], cache).astype(np.float64))


def mmlu_pro_passages(eval_dir, cache, n=600):
    rows = read_jsonl(os.path.join(eval_dir, "domain/mmlu_pro_train.jsonl"))
    ps = passages([r["text"] for r in rows], seed=3)[:n]
    return normalize(embed([{"text": t} for t in ps], cache).astype(np.float64))


def fit_jailbreak(x, y, xe, ye, xa=None):
    """Balanced logistic head on the data plus the extra prompts (weighted) and the
    academic benign text `xa` (when given)."""
    cw = balanced_weights(y, 2)
    parts_x, parts_y, parts_w = [x, xe], [y, ye], [cw[y], cw[ye] * EXTRA_WEIGHT]
    if xa is not None:
        parts_x.append(xa)
        parts_y.append(np.zeros(len(xa), dtype=y.dtype))
        parts_w.append(np.full(len(xa), cw[0] * ACADEMIC_WEIGHT))
    return fit_softmax(np.concatenate(parts_x), np.concatenate(parts_y), 2, l2=JB_L2,
                       sample_weight=np.concatenate(parts_w))


def train(args):
    cache = os.path.join(ROOT, "build/cache")
    x, y, _ = domain_data(args.eval_dir, cache)
    w, b = fit_softmax(x, y, len(DOMAIN_LABELS), l2=DOMAIN_L2, class_weight=balanced_weights(y, 14))
    acc = float(np.mean(predict_proba(w, b, x).argmax(1) == y))
    os.makedirs(args.out, exist_ok=True)
    version = "mmlu-pro-train-%d" % len(y)
    with open(os.path.join(args.out, "domain.json"), "w") as f:
        json.dump(head_json("domain", DOMAIN_LABELS, w, b, version), f, separators=(",", ":"))
    print(f"domain head: {len(y)} examples, train accuracy {acc:.3f}")

    x, y, _ = jailbreak_data(args.eval_dir, cache)
    xe, ye = jailbreak_extra(cache)
    xa = academic_negatives(args.eval_dir, cache)
    w, b = fit_jailbreak(x, y, xe, ye, xa)
    version = "jailbreak-vs-benign-%d+extra-%d+academic-%d" % (len(y), len(ye), len(xa))
    with open(os.path.join(args.out, "jailbreak.json"), "w") as f:
        json.dump(head_json("jailbreak", ["benign", "jailbreak"], w, b, version), f, separators=(",", ":"))
    auc = roc_auc(y, predict_proba(w, b, x)[:, 1])
    print(f"jailbreak head: {len(y)} examples, train AUC {auc:.3f}")


def evaluate(args):
    cache = os.path.join(ROOT, "build/cache")
    k = args.folds
    print(f"## Domain (14 MMLU-Pro categories), {k}-fold cross-validation on domain/mmlu_pro_train.jsonl")
    x, y, _ = domain_data(args.eval_dir, cache)
    pred = np.zeros_like(y)
    for fold in kfold_indices(len(y), k):
        mask = np.ones(len(y), bool)
        mask[fold] = False
        w, b = fit_softmax(x[mask], y[mask], 14, l2=DOMAIN_L2, class_weight=balanced_weights(y[mask], 14))
        pred[fold] = predict_proba(w, b, x[fold]).argmax(1)
    SUMMARY["domain accuracy (5-fold)"] = float(np.mean(pred == y))
    SUMMARY["domain macro-F1 (5-fold)"] = float(macro_f1(y, pred, 14))
    print("| metric | value |\n|---|---|")
    print(f"| examples | {len(y)} |")
    print(f"| accuracy | {np.mean(pred == y):.3f} |")
    print(f"| macro-F1 | {macro_f1(y, pred, 14):.3f} |")
    print(f"| majority-class baseline accuracy | {np.bincount(y).max() / len(y):.3f} |")
    print()
    print("| category | n | recall |\n|---|---|---|")
    for c, name in enumerate(DOMAIN_LABELS):
        m = y == c
        print(f"| {name} | {m.sum()} | {np.mean(pred[m] == c):.3f} |")
    # External test: the committed head on MMLU questions mapped to MMLU-Pro categories.
    head = json.load(open(os.path.join(ROOT, "models/heads/domain.json")))
    ext = read_jsonl(os.path.join(args.eval_dir, "domain/mmlu_mapped_60_per_category.jsonl"))
    xe = normalize(embed(ext, cache).astype(np.float64))
    ye = np.array([DOMAIN_LABELS.index(r["label"]) for r in ext])
    pe = predict_proba(np.array(head["weights"]), np.array(head["bias"]), xe).argmax(1)
    print()
    SUMMARY["domain accuracy, committed head, MMLU mapped"] = float(np.mean(pe == ye))
    print(f"Committed head on domain/mmlu_mapped_60_per_category.jsonl (MMLU questions, {len(ye)} rows, "
          f"other distribution): accuracy {np.mean(pe == ye):.3f}, macro-F1 {macro_f1(ye, pe, 14):.3f}")
    print()

    print(f"## Jailbreak, {k}-fold cross-validation on jailbreak/jailbreak_vs_benign.jsonl")
    x, y, rows = jailbreak_data(args.eval_dir, cache)
    xe, ye = jailbreak_extra(cache)
    xa = academic_negatives(args.eval_dir, cache)
    score = np.zeros(len(y))
    folds = kfold_indices(len(y), k)
    for fold in folds:
        mask = np.ones(len(y), bool)
        mask[fold] = False
        w, b = fit_jailbreak(x[mask], y[mask], xe, ye, xa)
        score[fold] = predict_proba(w, b, x[fold])[:, 1]
    neg = np.sort(score[y == 0])
    for fpr in (0.01, 0.05):
        thr = neg[min(len(neg) - 1, int(np.ceil((1 - fpr) * len(neg))) - 1)]
        print(f"score threshold at {fpr:.0%} false-positive rate on benign rows (cross-validated): {thr:.3f}")
    length = np.array([len(r["text"]) for r in rows], dtype=np.float64)
    # Length-only baseline: score = text length (longer = more likely jailbreak).
    subsets = sorted({r["subset"] for r in rows})
    print("Subsets with only one class are scored against all benign rows of the other subsets.")
    print("| subset | jb | benign | AUC | recall@1%FPR | recall@5%FPR | length-only AUC |")
    print("|---|---|---|---|---|---|---|")

    def line(name, sel):
        ys, ss, ls = y[sel], score[sel], length[sel]
        print(f"| {name} | {int(ys.sum())} | {int((ys == 0).sum())} | {roc_auc(ys, ss):.3f} | "
              f"{recall_at_fpr(ys, ss, 0.01):.3f} | {recall_at_fpr(ys, ss, 0.05):.3f} | {roc_auc(ys, ls):.3f} |")

    line("all", np.ones(len(y), bool))
    SUMMARY["jailbreak AUC (5-fold)"] = float(roc_auc(y, score))
    SUMMARY["jailbreak recall@1%FPR (5-fold)"] = float(recall_at_fpr(y, score, 0.01))
    print()
    xp = mmlu_pro_passages(args.eval_dir, cache)
    xs = mmlu_pro_sentences(args.eval_dir, cache)
    print(f"False alarms on {len(xp)} passages of MMLU-Pro questions (about one encoder window each; "
          f"the filler of the compression eval) and on {len(xs)} single sentences of them (what window "
          "refinement scores), head trained on all rows:")
    print("| head | passages > 0.5 | passages > 0.8 | sentences > 0.5 | sentences > 0.8 |")
    print("|---|---|---|---|---|")
    for name, extra in (("without academic text", None), ("with academic text (committed)", xa)):
        w, b = fit_jailbreak(x, y, xe, ye, extra)
        sp = predict_proba(w, b, xp)[:, 1]
        ss = predict_proba(w, b, xs)[:, 1]
        print(f"| {name} | {np.mean(sp > 0.5):.3f} | {np.mean(sp > 0.8):.3f} | "
              f"{np.mean(ss > 0.5):.4f} | {np.mean(ss > 0.8):.4f} |")
    print()
    for s in subsets:
        in_s = np.array([r["subset"] == s for r in rows])
        if len(set(y[in_s])) == 2:
            line(s, in_s)
        elif y[in_s].all():
            line(s + " (vs all benign)", in_s | (y == 0))
        else:
            line(s + " (vs all jailbreaks)", in_s | (y == 1))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("command", choices=["train", "eval"])
    ap.add_argument("--eval-dir", default=os.path.join(ROOT, "../shared/eval"))
    ap.add_argument("--out", default=os.path.join(ROOT, "models/heads"))
    ap.add_argument("--folds", type=int, default=5)
    ap.add_argument("--config", help="daemon configuration whose encoder makes the embeddings (default: the daemon's)")
    ap.add_argument("--summary", help="write the headline metrics of `eval` to this JSON file")
    args = ap.parse_args()
    global CONFIG
    CONFIG = args.config and os.path.abspath(args.config)
    t = time.time()
    (train if args.command == "train" else evaluate)(args)
    if args.summary and SUMMARY:
        with open(args.summary, "w") as f:
            json.dump(SUMMARY, f, indent=1)
    print(f"\n({time.time() - t:.0f}s)", file=sys.stderr)


if __name__ == "__main__":
    main()
