#!/usr/bin/env python3
"""PII precision / recall / F1 per entity type on pii/presidio_synth_v2.jsonl.

Runs `semroute-daemon classify --signals pii` over every text (the model and
the validated patterns, exactly as served) and matches predicted spans to gold
spans of the corresponding type: a prediction is a true positive when it
overlaps a gold span of its type; a gold span is found when a prediction of
its type overlaps it. Offsets in the data are code points; the daemon reports
UTF-8 bytes and is converted.
"""
import argparse
import collections
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# Presidio type -> semroute type. Types with no semroute counterpart are
# reported as not covered.
GOLD_TO_OURS = {
    "PERSON": "PERSON",
    "STREET_ADDRESS": "STREET_ADDRESS",
    "GPE": "LOCATION",
    "CREDIT_CARD": "CREDIT_CARD",
    "PHONE_NUMBER": "PHONE_NUMBER",
    "EMAIL_ADDRESS": "EMAIL_ADDRESS",
    "ZIP_CODE": "ZIP_CODE",
    "DOMAIN_NAME": "URL",
    "IBAN_CODE": "IBAN_CODE",
    "US_SSN": "US_SSN",
    "IP_ADDRESS": "IP_ADDRESS",
    "US_DRIVER_LICENSE": "DRIVER_LICENSE",
}


def byte_to_char(text):
    m = {}
    b = 0
    for i, ch in enumerate(text):
        m[b] = i
        b += len(ch.encode("utf-8"))
    m[b] = len(text)
    return m


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--eval-dir", default=os.path.join(ROOT, "../shared/eval"))
    ap.add_argument("--config", help="daemon configuration (default: the daemon's)")
    ap.add_argument("--summary", help="write the headline metrics to this JSON file")
    args = ap.parse_args()
    config = ["--config", os.path.abspath(args.config)] if args.config else []
    rows = [json.loads(l) for l in open(os.path.join(args.eval_dir, "pii/presidio_synth_v2.jsonl"), encoding="utf-8")]
    daemon = os.environ.get("SEMROUTE_DAEMON_BIN", os.path.join(ROOT, "target/release/semroute-daemon"))
    if not os.path.exists(daemon):
        sys.exit("semroute-daemon not built: run `make build`")
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps({"text": r["text"]}) + "\n")
        path = f.name
    t = time.time()
    done = subprocess.run([daemon, "classify", *config, "--signals", "pii", "--input", path], cwd=ROOT,
                          capture_output=True, text=True)
    # Split at "\n" only: `splitlines` also splits at U+2028 and U+0085 inside JSON strings.
    out = [l for l in done.stdout.split("\n") if l.strip()]
    elapsed = time.time() - t
    os.remove(path)
    # Exit status 1: some input got an `{"error": ...}` line; every input is still answered.
    if done.returncode not in (0, 1) or len(out) != len(rows):
        sys.exit(f"classify failed ({done.returncode}, {len(out)} of {len(rows)} lines): {done.stderr[-2000:]}")

    tp_pred = collections.Counter()
    n_pred = collections.Counter()
    found_gold = collections.Counter()
    n_gold = collections.Counter()
    sources = collections.Counter()
    for r, line in zip(rows, out):
        res = json.loads(line)
        m = byte_to_char(r["text"])
        preds = [(p["type"], m.get(p["start"], 0), m.get(p["end"], 0)) for p in res.get("pii", [])]
        for p in res.get("pii", []):
            sources[(p["type"], p["source"])] += 1
        gold = [(GOLD_TO_OURS.get(g["type"]), g["type"], g["start"], g["end"]) for g in r["entities"]]
        for typ, s, e in preds:
            n_pred[typ] += 1
            if any(gt == typ and s < ge and gs < e for gt, _, gs, ge in gold):
                tp_pred[typ] += 1
        for gt, gname, gs, ge in gold:
            n_gold[gname] += 1
            if gt and any(pt == gt and s < ge and gs < e for pt, s, e in preds):
                found_gold[gname] += 1

    def f1(p, r):
        return 0.0 if p + r == 0 else 2 * p * r / (p + r)

    print(f"## PII on pii/presidio_synth_v2.jsonl ({len(rows)} texts, {elapsed:.0f} s, "
          f"{1000 * elapsed / len(rows):.1f} ms per text including process start)")
    print()
    print("Overlap matching per type. Precision is per semroute type, recall per gold type.")
    print()
    print("| gold type | semroute type | gold | recall | predicted | precision | F1 |")
    print("|---|---|---|---|---|---|---|")
    tot = collections.Counter()
    for gname in sorted(n_gold, key=lambda k: -n_gold[k]):
        ours = GOLD_TO_OURS.get(gname)
        rec = found_gold[gname] / n_gold[gname]
        if ours:
            prec = tp_pred[ours] / n_pred[ours] if n_pred[ours] else 0.0
            print(f"| {gname} | {ours} | {n_gold[gname]} | {rec:.3f} | {n_pred[ours]} | {prec:.3f} | {f1(prec, rec):.3f} |")
            tot["gold"] += n_gold[gname]
            tot["found"] += found_gold[gname]
            tot["pred"] += n_pred[ours]
            tot["tp"] += tp_pred[ours]
        else:
            print(f"| {gname} | (not covered) | {n_gold[gname]} | 0.000 | - | - | - |")
    extra = [t for t in n_pred if t not in GOLD_TO_OURS.values()]
    for t in sorted(extra):
        print(f"| (none) | {t} | 0 | - | {n_pred[t]} | 0.000 | - |")
        tot["pred"] += n_pred[t]
    p = tot["tp"] / max(tot["pred"], 1)
    r = tot["found"] / max(tot["gold"], 1)
    print(f"| **covered types, micro** | | {tot['gold']} | {r:.3f} | {tot['pred']} | {p:.3f} | {f1(p, r):.3f} |")
    if args.summary:
        with open(args.summary, "w") as f:
            json.dump({"PII precision (covered types)": p, "PII recall (covered types)": r,
                       "PII F1 (covered types)": f1(p, r)}, f, indent=1)
    all_gold = sum(n_gold.values())
    print(f"\nAll gold entities (including uncovered types): recall {tot['found'] / all_gold:.3f} of {all_gold}.")
    print("\nPredictions by source: " + ", ".join(f"{t}/{s}: {n}" for (t, s), n in sorted(sources.items())))


if __name__ == "__main__":
    main()
