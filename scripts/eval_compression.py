#!/usr/bin/env python3
"""Decision agreement with and without compression on long prompts.

Builds long prompts from the evaluation data: a target text embedded at a
depth of 10%, 50% or 90% inside 2K-32K tokens of other text:

- domain: an MMLU-Pro question inside other MMLU-Pro questions of the same
  category (a long single-topic prompt, so the full decision is meaningful);
- jailbreak: a jailbreak or benign prompt inside MMLU-Pro questions of mixed
  categories;
- PII: a text with personal data inside MMLU-Pro questions of mixed
  categories. Each prompt is classified twice by the daemon
(`semroute-daemon classify`): whole, and after the filter's compression to
its token budget (`compress_jsonl`, the filter's own compressor compiled
natively). Both calls carry what the filter sends with a text: the sentences
its risk scan flagged with a jailbreak cue (`flagged_sentences`, scored alone
by the jailbreak signal), found in the whole prompt by the same compressor
with an unlimited budget. Reported per length:

- domain agreement: same domain label; and the accuracy of both labels
  against the prompt's MMLU-Pro category;
- jailbreak agreement: the same decision as the filter's (its threshold, or a cue's
  lower threshold where the risk scan found an instruction override or a harmful
  request); and, since
  the whole prompt's decision can come from its filler, the accuracy of both
  decisions against the planted text's label;
- PII routing agreement: the same decision under the PII policy of
  envoy.yaml (route when an entity of a type outside its allow list scores at
  least its min_score); and, since the whole prompt's decision can come from
  the PII model's hits in its filler, the accuracy of both decisions against
  the planted text's label (routed when its annotated entities include a type
  outside the allow list);
- PII entity recall: entities (type and value) found in the whole prompt that
  are also found in the compressed one, over the planted text's span (the
  personal data put there) and over the whole prompt (filler included); over
  the planted text's entities that the PII policy acts on (a type outside the
  allow list, at least min_score: the ones that decide the route); and, for
  the planted text, the share of those entities whose text is still in
  the compressed prompt (the PII model can label the same words differently
  in other surroundings, so this separates what compression dropped from what
  the model relabelled). Strict recall needs the same type and the same text;
  the policy-acted recall is also given with overlap matching (a partial
  boundary match, as in MUC and SemEval-2013 task 9.1): the entity's text is
  kept and the compressed prompt has an entity of a type the policy acts on
  over some of it. That is what the routing decision needs, since every such
  type takes the same route, and the model's span boundaries move with the
  surroundings ("28919 136 Filadelfeos Str." whole, "... Str., Klirou"
  compressed).

The whole prompts are classified with a window cap high enough to see every
token (never truncated), so the comparison is against the full decision.

With the PII signal, a second table needs no daemon: every PII text whose
annotations hold a type the policy acts on is planted in filler of each length
(depth 10%, 50% or 90%) and compressed, and the share of those annotated
entities whose text the compressed prompt still holds is reported, over all of
them and per type, for the even- and odd-numbered records separately (the
filter's detectors were tuned on the even ones, and on new sentences drawn from
the same public generator, presidio-evaluator's sentence faker; the odd ones are
held out).
"""
import argparse
import json
import os
import random
import struct
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def filter_config(path=os.path.join(ROOT, "envoy.yaml")):
    """The filter's JSON configuration: the `value: |` block of the wasm filter's
    `configuration` in envoy.yaml (read as text, so no YAML library is needed)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    for n, line in enumerate(lines):
        if line.strip() == "value: |":
            indent = len(line) - len(line.lstrip())
            block = []
            for l in lines[n + 1:]:
                if l.strip() and len(l) - len(l.lstrip()) <= indent:
                    break
                block.append(l)
            return json.loads("\n".join(block))
    sys.exit(f"{path}: no filter configuration (`value: |` block) found")


# The decisions the filter acts on, from its configuration in envoy.yaml: the jailbreak
# threshold, the PII policy (types allowed, the score an entity needs to count) and the
# compression settings.
FILTER_CONFIG = filter_config()
JB_THRESHOLD = FILTER_CONFIG["jailbreak"]["threshold"]
# The risk-scan cues that lower the jailbreak threshold where the scan found them (the kinds
# `compress_jsonl` reports), with the filter configuration's key of each cue's threshold.
CUE_THRESHOLD_KEYS = {"override": "override_threshold", "harmful_request": "harmful_request_threshold"}
# The filter's thresholds from envoy.yaml: "threshold", then one per cue kind (None: the
# cue lowers nothing).
JB_THRESHOLDS = {"threshold": JB_THRESHOLD,
                 **{kind: FILTER_CONFIG["jailbreak"].get(key) for kind, key in CUE_THRESHOLD_KEYS.items()}}


def cue_flags(risk):
    """{cue kind: whether the risk scan found it} for one row's `risk` kinds (names)."""
    return {kind: kind in risk for kind in CUE_THRESHOLD_KEYS}


def jailbreak_blocked(score, cues, thresholds=JB_THRESHOLDS):
    """The filter's jailbreak decision: `score` at or above the lowest threshold that
    applies: `thresholds["threshold"]`, and each cue kind's threshold where `cues[kind]` (the
    risk scan found it; see `cue_flags`; a kind missing from `cues` or a None threshold
    lowers nothing). Scores and flags are scalars or numpy arrays of one shape. Compared in
    f32, as the filter does (the daemon's scores are f32, printed in their shortest form, and
    so are its thresholds): a score printed as the threshold's f32 value is blocked, as by
    the filter."""
    score, general = _f32(score), thresholds["threshold"]
    blocked = score >= _f32(general)
    for kind in CUE_THRESHOLD_KEYS:
        t = thresholds.get(kind)
        if t is not None and kind in cues:
            blocked = blocked | (cues[kind] & (score >= _f32(min(general, t))))
    return blocked


def _f32(x):
    """`x` rounded to f32 (a numpy array as a float32 array; this script runs without numpy)."""
    if hasattr(x, "astype"):
        return x.astype("float32")
    return struct.unpack("<f", struct.pack("<f", x))[0]


PII_ALLOW = set(FILTER_CONFIG["pii"]["allow"])
PII_MIN_SCORE = FILTER_CONFIG["pii"]["min_score"]
COMPRESSION = FILTER_CONFIG.get("compression", {})
LENGTHS = [2000, 8000, 16000, 32000]
DEPTHS = [0.1, 0.5, 0.9]


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def run_jsonl(cmd, rows, **kw):
    with tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False, encoding="utf-8") as f:
        for r in rows:
            f.write(json.dumps(r, ensure_ascii=False) + "\n")
        path = f.name
    try:
        with open(path, encoding="utf-8") as stdin:
            done = subprocess.run(cmd, stdin=stdin, capture_output=True, text=True, cwd=ROOT, **kw)
    finally:
        os.remove(path)
    # One JSON line per input: split at "\n" only (`splitlines` also splits at U+2028, U+0085
    # and others, which JSON writers leave unescaped inside strings).
    lines = [l for l in done.stdout.split("\n") if l.strip()]
    # `classify` exits with 1 when some input got an `{"error": ...}` line; every input is
    # still answered on its own line.
    if done.returncode not in (0, 1) or len(lines) != len(rows):
        raise RuntimeError(f"{cmd[0]} failed ({done.returncode}, {len(lines)} of {len(rows)} lines): {done.stderr[-2000:]}")
    return [json.loads(l) for l in lines]


def approx_tokens(text):
    return int(len(text.split()) * 1.35)


def annotated_pii_kept(pii, filler_pool, lengths, compressor):
    """Prints the share of annotated personal data (types the policy acts on) whose text
    compression keeps, per length, for even- and odd-numbered records (their line in the
    data file, from 0)."""
    rng = random.Random(5)
    records = [(i, r) for i, r in enumerate(pii) if any(e["type"] not in PII_ALLOW for e in r["entities"])]
    print()
    print(f"## Annotated personal data kept by compression ({len(records)} PII texts with a type "
          "the policy acts on, each planted once per length; no daemon)")
    print()
    print("| length (tokens) | records | kept, even records | kept, odd records (held out) | records with all kept | per type (all records) |")
    print("|---|---|---|---|---|---|")
    for length in lengths:
        rows = []
        for _, r in records:
            prompt, _ = build_prompt(r["text"], filler_pool, rng, length, rng.choice(DEPTHS))
            rows.append({"text": prompt, "config": COMPRESSION})
        out = run_jsonl([compressor], rows)
        kept = {0: [0, 0], 1: [0, 0]}
        per_type = {}
        whole = 0
        for (i, r), o in zip(records, out):
            acted = [e for e in r["entities"] if e["type"] not in PII_ALLOW]
            hits = [e["value"] in o["text"] for e in acted]
            kept[i % 2][0] += sum(hits)
            kept[i % 2][1] += len(hits)
            whole += all(hits)
            for e, h in zip(acted, hits):
                t = per_type.setdefault(e["type"], [0, 0])
                t[0] += h
                t[1] += 1
        types = ", ".join(f"{k} {v[0]}/{v[1]}" for k, v in sorted(per_type.items(), key=lambda kv: -kv[1][1]))
        share = lambda k: f"{k[0] / max(k[1], 1):.3f} ({k[0]}/{k[1]})"
        print(f"| {length} | {len(records)} | {share(kept[0])} | {share(kept[1])} | {whole / max(len(records), 1):.3f} | {types} |")


def build_prompt(target, filler_pool, rng, length, depth):
    """Target text at `depth` inside filler of about `length` tokens; returns
    the prompt and the byte span of the target in it."""
    filler = []
    total = approx_tokens(target)
    while total < length:
        t = rng.choice(filler_pool)
        filler.append(t)
        total += approx_tokens(t)
    k = int(len(filler) * depth)
    head = "\n\n".join(filler[:k] + [""]) if k else ""
    prompt = "\n\n".join(filler[:k] + [target] + filler[k:])
    start = len(head.encode("utf-8"))
    return prompt, (start, start + len(target.encode("utf-8")))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--eval-dir", default=os.path.join(ROOT, "../shared/eval"))
    # 6 per cell is 72 prompts per signal: enough that the 98% jailbreak target can be met
    # with a difference (1/72 = 1.4%); with 36, one difference is already 2.8%.
    ap.add_argument("--per-cell", type=int, default=6, help="prompts per (length, depth) and signal")
    ap.add_argument("--lengths", default=",".join(map(str, LENGTHS)))
    ap.add_argument("--compressor", default=os.path.join(ROOT, "target/release/examples/compress_jsonl"),
                    help="the compress_jsonl binary (to compare builds)")
    ap.add_argument("--signals", default="domain,jailbreak,pii",
                    help="which signals to evaluate (comma-separated; all by default)")
    ap.add_argument("--seed", type=int, default=0,
                    help="draws the planted texts and the filler (another seed: another sample)")
    ap.add_argument("--dump", help="write one JSON line per case (decisions whole and compressed) to this file")
    args = ap.parse_args()
    lengths = [int(x) for x in args.lengths.split(",")]
    signals = [x for x in ("domain", "jailbreak", "pii") if x in args.signals.split(",")]
    rng = random.Random(args.seed)
    daemon = os.path.join(ROOT, "target/release/semroute-daemon")
    compressor = args.compressor
    for p in (daemon, compressor):
        if not os.path.exists(p):
            sys.exit(f"{p} missing: run `make build`")

    domain = read_jsonl(os.path.join(args.eval_dir, "domain/mmlu_pro_train.jsonl"))
    jail = read_jsonl(os.path.join(args.eval_dir, "jailbreak/jailbreak_vs_benign.jsonl"))
    pii_all = read_jsonl(os.path.join(args.eval_dir, "pii/presidio_synth_v2.jsonl"))
    pii = [r for r in pii_all if r["entities"]]
    rng.shuffle(domain)
    filler_pool = [r["text"] for r in domain[:3000]]
    by_category = {}
    for r in domain[:3000]:
        by_category.setdefault(r["label"], []).append(r["text"])
    targets = {
        # Records, so that each planted question keeps its own category.
        "domain": list(domain[3000:]),
        "jailbreak": [r["text"] for r in jail if r["label"] == "jailbreak"] + [r["text"] for r in jail if r["label"] == "benign"],
        "pii": [r["text"] for r in pii],
    }
    # Whether each planted PII text should be routed under the policy (annotated types).
    pii_routes = {r["text"]: any(e["type"] not in PII_ALLOW for e in r["entities"]) for r in pii}
    for v in targets.values():
        rng.shuffle(v)
    jailbreak_texts = {r["text"] for r in jail if r["label"] == "jailbreak"}

    cases = []  # (signal, length, depth, text, target byte span)
    rows_target = []  # the planted text of each case
    categories = []  # the filler's MMLU-Pro category of each domain case (None otherwise)
    for signal in signals:
        i = 0
        for length in lengths:
            for depth in DEPTHS:
                for _ in range(args.per_cell):
                    t = targets[signal][i % len(targets[signal])]
                    category = None
                    if signal == "domain":
                        t, category = t["text"], t["label"]
                    pool = by_category[category] if category else filler_pool
                    categories.append(category)
                    i += 1
                    prompt, span = build_prompt(t, pool, rng, length, depth)
                    rows_target.append(t)
                    cases.append((signal, length, depth, prompt, span))

    t0 = time.time()
    comp = run_jsonl([compressor], [{"text": c[3], "config": COMPRESSION} for c in cases])
    compress_s = time.time() - t0
    # The flagged sentences of the whole prompts: what the filter would send with the
    # prompt if it fitted its budget.
    uncut = dict(COMPRESSION, budget_tokens=1 << 20)
    flags = run_jsonl([compressor], [{"text": c[3], "config": uncut} for c in cases])
    for c, f in zip(cases, flags):
        if f["text"] != c[3]:
            sys.exit("compress_jsonl changed a prompt that fits an unlimited budget")
    # Whole prompts: windows for every token (no truncation), so the
    # comparison is against the decision on the full text.
    cfg = os.path.join(tempfile.gettempdir(), "semroute-eval-daemon.toml")
    with open(cfg, "w") as f:
        f.write("[limits]\nmax_windows = 1000\nmax_text_bytes = 16777216\n")
    rows_full = [{"text": c[3], "flagged_sentences": f["flagged_sentences"]}
                 for c, f in zip(cases, flags)]
    rows_comp = [{"text": r["text"], "flagged_sentences": r["flagged_sentences"]} for r in comp]
    sig_of = lambda s: s

    def classify(rows, signal):
        return run_jsonl([daemon, "classify", "--config", cfg, "--signals", signal], rows)

    results = {}
    t1 = time.time()
    for signal in signals:
        idx = [i for i, c in enumerate(cases) if c[0] == signal]
        full = classify([rows_full[i] for i in idx], sig_of(signal))
        small = classify([rows_comp[i] for i in idx], sig_of(signal))
        for j, i in enumerate(idx):
            if signal == "jailbreak":
                # The risk scan reads the whole prompt either way, so one cue for both.
                for r in (full[j], small[j]):
                    r["blocked"] = jailbreak_blocked(r["jailbreak"]["score"], cue_flags(comp[i]["risk"]))
            results[i] = (full[j], small[j])
    classify_s = time.time() - t1

    print(f"## Decisions with and without compression ({len(cases)} long prompts; "
          f"targets at depths {DEPTHS}; compression as in envoy.yaml: {json.dumps(COMPRESSION)})")
    print()
    print("| length (tokens) | kept tokens (median) | domain agreement | domain accuracy vs category: whole / compressed | jailbreak agreement | jailbreak accuracy vs label: whole / compressed | PII routing agreement | PII routing accuracy vs label: whole / compressed | PII recall, planted text | PII recall, planted, types the policy acts on | same, overlap match | planted entity text kept | PII recall, whole prompt | full truncated |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    jb_split = []
    for length in lengths:
        dom = [results[i] for i, c in enumerate(cases) if c[0] == "domain" and c[1] == length]
        jb = [results[i] for i, c in enumerate(cases) if c[0] == "jailbreak" and c[1] == length]
        pi = [results[i] for i, c in enumerate(cases) if c[0] == "pii" and c[1] == length]
        kept = sorted(comp[i]["kept_tokens"] for i, c in enumerate(cases) if c[1] == length)
        d_agree = sum(f["domain"]["label"] == s["domain"]["label"] for f, s in dom) / max(len(dom), 1)
        dom_cat = [categories[i] for i, c in enumerate(cases) if c[0] == "domain" and c[1] == length]
        d_full = sum(f["domain"]["label"] == k for (f, _), k in zip(dom, dom_cat)) / max(len(dom), 1)
        d_comp = sum(s["domain"]["label"] == k for (_, s), k in zip(dom, dom_cat)) / max(len(dom), 1)
        j_agree = sum(f["blocked"] == s["blocked"] for f, s in jb) / max(len(jb), 1)
        jb_idx = [i for i, c in enumerate(cases) if c[0] == "jailbreak" and c[1] == length]
        labels = [rows_target[i] in jailbreak_texts for i in jb_idx]
        j_full = sum(f["blocked"] == l for (f, _), l in zip(jb, labels)) / max(len(jb), 1)
        j_comp = sum(s["blocked"] == l for (_, s), l in zip(jb, labels)) / max(len(jb), 1)
        found = total = p_found = p_total = p_text = a_found = a_total = o_found = 0
        acts_on = lambda e: e["type"] not in PII_ALLOW and e.get("score", 1.0) >= PII_MIN_SCORE
        routes = lambda r: any(acts_on(e) for e in r.get("pii", []))
        routing_agree = sum(routes(f) == routes(s) for f, s in pi)
        pi_idx = [i for i, c in enumerate(cases) if c[0] == "pii" and c[1] == length]
        pi_labels = [pii_routes.get(rows_target[i], False) for i in pi_idx]
        r_full = sum(routes(f) == l for (f, _), l in zip(pi, pi_labels)) / max(len(pi), 1)
        r_comp = sum(routes(s) == l for (_, s), l in zip(pi, pi_labels)) / max(len(pi), 1)
        for (f, s), i in zip(pi, [i for i, c in enumerate(cases) if c[0] == "pii" and c[1] == length]):
            full_text, small_text = rows_full[i]["text"], rows_comp[i]["text"]
            lo, hi = cases[i][4]
            fb, sb = full_text.encode(), small_text.encode()
            small_ents = {(e["type"], sb[e["start"]:e["end"]].decode("utf-8", "replace")) for e in s.get("pii", [])}
            small_acted = [(e["start"], e["end"]) for e in s.get("pii", []) if acts_on(e)]

            def overlapped(tb):
                # Some occurrence of the entity's bytes in the compressed prompt that an
                # acted-on compressed entity covers at least in part.
                at = sb.find(tb)
                while tb and at >= 0:
                    if any(a < at + len(tb) and at < b for a, b in small_acted):
                        return True
                    at = sb.find(tb, at + 1)
                return False

            for e in f.get("pii", []):
                hit = (e["type"], fb[e["start"]:e["end"]].decode("utf-8", "replace")) in small_ents
                total += 1
                found += hit
                if lo <= e["start"] and e["end"] <= hi:
                    p_total += 1
                    p_found += hit
                    p_text += fb[e["start"]:e["end"]].decode("utf-8", "replace") in small_text
                    if acts_on(e):
                        a_total += 1
                        a_found += hit
                        o_found += overlapped(fb[e["start"]:e["end"]])
        # Jailbreak disagreements, split by which decision matches the planted text's label.
        comp_right = sum((s["blocked"] == l) and (f["blocked"] != l)
                         for (f, s), l in zip(jb, labels))
        whole_right = sum((f["blocked"] == l) and (s["blocked"] != l)
                          for (f, s), l in zip(jb, labels))
        whole_ok = [(f, s) for (f, s), l in zip(jb, labels) if f["blocked"] == l]
        ok_agree = sum(f["blocked"] == s["blocked"] for f, s in whole_ok)
        if jb:
            jb_split.append((length, len(jb), comp_right, whole_right, ok_agree, len(whole_ok)))
        trunc = sum(f.get("truncated", False) for f, _ in dom + jb + pi)
        print(f"| {length} | {kept[len(kept) // 2]} | {d_agree:.3f} ({len(dom)}) | {d_full:.3f} / {d_comp:.3f} | {j_agree:.3f} ({len(jb)}) | {j_full:.3f} / {j_comp:.3f} | "
              f"{routing_agree / max(len(pi), 1):.3f} ({len(pi)}) | {r_full:.3f} / {r_comp:.3f} | {p_found / max(p_total, 1):.3f} ({p_total}) | {a_found / max(a_total, 1):.3f} ({a_total}) | {o_found / max(a_total, 1):.3f} | {p_text / max(p_total, 1):.3f} | {found / max(total, 1):.3f} ({total}) | {trunc} |")
    if jb_split:
        print()
        print("Jailbreak decisions that differ, by the one that matches the planted text's label "
              "(a whole prompt's decision can be wrong where the compressed one is right: its "
              "windows mix the planted text with filler), and agreement on the prompts whose "
              "whole-prompt decision is right:")
        print()
        print("| length (tokens) | prompts | differ | compressed right | whole right | agreement where the whole prompt is right |")
        print("|---|---|---|---|---|---|")
        for length, n, c_right, w_right, ok_agree, ok_n in jb_split:
            print(f"| {length} | {n} | {c_right + w_right} | {c_right} | {w_right} | {ok_agree / max(ok_n, 1):.3f} ({ok_agree}/{ok_n}) |")
        print()
    if args.dump:
        with open(args.dump, "w", encoding="utf-8") as f:
            for i, c in enumerate(cases):
                full, small = results[i]
                f.write(json.dumps({
                    "signal": c[0], "length": c[1], "depth": c[2], "category": categories[i],
                    "target": rows_target[i], "compressed": rows_comp[i]["text"],
                    "whole_text": rows_full[i]["text"], "target_span": cases[i][4] if c[0] == "pii" else None,
                    "whole": {k: full.get(k) for k in ("domain", "jailbreak", "pii")},
                    "small": {k: small.get(k) for k in ("domain", "jailbreak", "pii")},
                }, ensure_ascii=False) + "\n")
    if "pii" in signals:
        annotated_pii_kept(pii_all, filler_pool, lengths, compressor)
    print()
    print(f"compression of all prompts: {compress_s:.1f} s; classification: {classify_s:.0f} s")
    print("Targets of the reference implementation (its own report): domain 68%, jailbreak 72%, PII recall 98%.")


if __name__ == "__main__":
    main()
