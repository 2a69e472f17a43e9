#!/usr/bin/env python3
"""Classical extractive baseline for the compression benchmark: TextRank as published on PyPI
(`summa`, a pure-Python implementation of Mihalcea and Tarau 2004), run on the same prompt
texts as the filter's compressor and cut to about the same budget.

    python3 scripts/compression_baseline.py --texts DIR [--words N] [--runs N] [--max-seconds S]

DIR holds the prompts as `<name>.txt` (written by
`compression_bench --dump-texts DIR`). Each text is summarised to `--words` words (default
380, about 510 MiniLM tokens of English prose); `scripts/compression_bench.py` passes a
per-prompt word budget derived from the prompt's own token count instead. Prints one line per
prompt: name, words, median and minimum milliseconds, runs, words kept.

`summa` is installed with pip when it is missing. (`sumy`'s TextRank was the first choice,
but its sentence tokenizer needs NLTK data that pip does not install.)
"""

import argparse
import os
import statistics
import subprocess
import sys
import time


def ensure_summa():
    """Imports `summa`, installing it with pip first if needed."""
    try:
        import summa  # noqa: F401
    except ImportError:
        subprocess.check_call(
            [sys.executable, "-m", "pip", "install", "--quiet", "summa"],
            stdout=sys.stderr,
        )


def time_textrank(text, words, runs, max_seconds):
    """Runs summa's TextRank `runs` times (fewer once `max_seconds` have passed, at least
    once) and returns (list of milliseconds, words in the summary)."""
    from summa.summarizer import summarize

    times = []
    kept = 0
    start = time.perf_counter()
    for _ in range(max(1, runs)):
        t0 = time.perf_counter()
        summary = summarize(text, words=words)
        times.append((time.perf_counter() - t0) * 1e3)
        kept = len(summary.split())
        if time.perf_counter() - start > max_seconds:
            break
    return times, kept


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--texts", required=True, help="directory of <name>.txt prompts")
    ap.add_argument("--words", type=int, default=380, help="summary length in words")
    ap.add_argument("--runs", type=int, default=3, help="timed runs per prompt (median)")
    ap.add_argument(
        "--max-seconds",
        type=float,
        default=20.0,
        help="stop repeating a prompt after this many seconds (at least one run)",
    )
    args = ap.parse_args()
    ensure_summa()
    names = sorted(
        (f[:-4] for f in os.listdir(args.texts) if f.endswith(".txt")),
        key=lambda n: (len(n), n),
    )
    print(f"baseline: summa TextRank (PyPI), {args.words} words, up to {args.runs} runs")
    print(f"{'prompt':<16} {'words':>8} {'median ms':>10} {'min ms':>10} {'runs':>5} {'kept':>6}")
    for name in names:
        with open(os.path.join(args.texts, name + ".txt"), encoding="utf-8") as f:
            text = f.read()
        times, kept = time_textrank(text, args.words, args.runs, args.max_seconds)
        print(
            f"{name:<16} {len(text.split()):>8} {statistics.median(times):>10.1f} "
            f"{min(times):>10.1f} {len(times):>5} {kept:>6}"
        )


if __name__ == "__main__":
    main()
