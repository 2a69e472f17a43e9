"""The router classifiers' data: which rows train, which choose thresholds, which only validate.

Shared by `train_classifiers.py` (training) and `eval_classifiers.py` (reporting), so
both see the same split of the same files. Rows are read from the evaluation data
directory (`../shared/eval`, see its SOURCES.md); nothing is copied into the repository.

Splits are fixed by `SPLIT_SEED`: a row's bucket is a hash of the seed and its key (the
`group` where rows are paired, as BIPIA's clean and injected twins are, else the text),
so a pair never straddles two splits and a row keeps its bucket when others are added.

  train  trains the shipped weights: only rows whose licence allows redistributing
         derived weights (`redistributable`);
  calib  chooses thresholds (jailbreak decision threshold, aggregation): redistributable
         rows, never trained on;
  val    reports quality: never trained on, never used for a choice. Rows under
         non-commercial, unclear or missing licences are always here.
"""
from __future__ import annotations

import base64
import hashlib
import json
import os
import random
import re

DOMAIN_LABELS = [
    "biology", "business", "chemistry", "computer science", "economics", "engineering", "health",
    "history", "law", "math", "other", "philosophy", "physics", "psychology",
]
JAILBREAK_LABELS = ["benign", "jailbreak"]

SPLIT_SEED = "semroute-router-v1"
VAL_SHARE = 0.2
CALIB_SHARE = 0.1

# Licences of jailbreak_vs_benign.jsonl's sources (SOURCES.md; the rows carry none).
JVB_LICENSES = {
    "deepset_prompt_injections": "Apache-2.0",
    "jbb_PAIR": "MIT",
    "jbb_GCG": "MIT",
    "jbb_adaptive_random_search": "MIT",
    "xstest_safe": "CC-BY-4.0",
}
DOMAIN_LICENSE = "MIT"  # MMLU (hendrycks/test) and MMLU-Pro's dataset card

# Rows written for this project (data/README.md), under the project's licence.
PROJECT_DATA = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data")
PROJECT_LICENSE = "Apache-2.0"

_OPEN = re.compile(r"\b(MIT|Apache-2\.0|CC0-1\.0|CC-BY(-SA)?(-\d\.\d)?|public domain)\b", re.I)
_CLOSED = re.compile(r"\bNC\b|\b(unclear|no licen[cs]e|GPL|per repository|authors|research use)\b|\(c\)|©", re.I)


def redistributable(license: str | None) -> bool:
    """Whether weights trained on a row under `license` may be redistributed: an open
    licence (MIT, Apache-2.0, CC0, CC-BY, CC-BY-SA, public domain) and nothing that
    restricts it (non-commercial, GPL, unclear, missing, third-party copyright)."""
    if not license:
        return False
    return bool(_OPEN.search(license)) and not _CLOSED.search(license)


def split_of(key: str, license: str | None) -> str:
    """`train`, `calib` or `val` for a row with split key `key` (see the module doc)."""
    if not redistributable(license):
        return "val"
    h = int(hashlib.sha256(f"{SPLIT_SEED}:{key}".encode()).hexdigest()[:12], 16) / float(1 << 48)
    if h < VAL_SHARE:
        return "val"
    if h < VAL_SHARE + CALIB_SHARE:
        return "calib"
    return "train"


def read_jsonl(path: str) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def _norm(text: str) -> str:
    return " ".join(text.lower().split())


def _row(text, *, task, source, subset, license, key, domain=-1, jailbreak=-1, kind="request", extra=None):
    r = {
        "text": text,
        "task": task,
        "source": source,
        "subset": subset,
        "license": license,
        "domain": domain,
        "jailbreak": jailbreak,
        "kind": kind,
        "split": split_of(key, license),
    }
    if extra:
        r.update(extra)
    return r


def domain_rows(eval_dir: str, domain_calib: bool = False) -> list[dict]:
    """MMLU-Pro questions (split by seed) and MMLU questions that are not in MMLU-Pro
    (training only: the MMLU-Pro validation split must not be seen through its MMLU
    original). MMLU-Pro's calib bucket trains too, unless `domain_calib` keeps it for
    choices between runs (then no MMLU original of it trains either)."""
    out = []
    for r in read_jsonl(os.path.join(eval_dir, "domain/mmlu_pro_train.jsonl")):
        out.append(_row(r["text"], task="domain", source="mmlu_pro", subset="mmlu_pro", license=DOMAIN_LICENSE,
                        key=_norm(r["text"]), domain=DOMAIN_LABELS.index(r["label"]), jailbreak=0, kind="question"))
    # MMLU-Pro's calib bucket is not needed for a domain threshold: it trains too.
    if not domain_calib:
        for r in out:
            if r["split"] == "calib":
                r["split"] = "train"
    pro_val = {_norm(r["text"]) for r in out if r["split"] != "train"}
    for r in read_jsonl(os.path.join(eval_dir, "domain/mmlu_train.jsonl")):
        if r.get("in_mmlu_pro") or _norm(r["text"]) in pro_val:
            continue
        row = _row(r["text"], task="domain", source="mmlu", subset="mmlu", license=DOMAIN_LICENSE,
                   key=_norm(r["text"]), domain=DOMAIN_LABELS.index(r["label"]), jailbreak=0, kind="question")
        row["split"] = "train"
        out.append(row)
    return out


def jailbreak_rows(eval_dir: str) -> list[dict]:
    """Jailbreak and prompt-injection positives, ordinary requests, role-play and
    security-flavoured hard negatives, and document passages (benign)."""
    out = []
    j = lambda p: os.path.join(eval_dir, p)  # noqa: E731
    for r in read_jsonl(j("jailbreak/train_pool.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="train_pool", subset=r["subset"], license=r.get("license"),
                        key=str(r.get("group") or _norm(r["text"])), jailbreak=int(r["label"] == "jailbreak")))
    for r in read_jsonl(j("jailbreak/in_the_wild_train.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="in_the_wild", subset="in_the_wild", license=r.get("license"),
                        key=_norm(r["text"]), jailbreak=1))
    for r in read_jsonl(j("jailbreak/jailbreak_vs_benign.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="jailbreak_vs_benign", subset=r["subset"],
                        license=JVB_LICENSES.get(r["subset"]), key=_norm(r["text"]),
                        jailbreak=int(r["label"] == "jailbreak")))
    for r in read_jsonl(j("benign/dolly_requests.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="dolly", subset=r["subset"], license=r.get("license"),
                        key=_norm(r["text"]), jailbreak=0))
    # Ordinary requests in languages whose only rows above are injections (data/README.md).
    for r in read_jsonl(os.path.join(PROJECT_DATA, "multilingual_requests.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="semroute", subset="multilingual_requests",
                        license=PROJECT_LICENSE, key=_norm(r["text"]), jailbreak=0,
                        extra={"language": r["language"]}))
    # Ordinary follow-ups of a conversation (data/README.md): they refer to earlier turns,
    # take back or correct them, and ask to repeat, rewrite or translate them, as the
    # public pool's extraction and override attacks do.
    for r in read_jsonl(os.path.join(PROJECT_DATA, "followup_requests.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="semroute", subset="followup_requests",
                        license=PROJECT_LICENSE, key=_norm(r["text"]), jailbreak=0))
    for r in read_jsonl(j("benign/documents.jsonl")):
        out.append(_row(r["text"], task="jailbreak", source="documents", subset=r["kind"], license=r.get("license"),
                        key=_norm(r["text"]), jailbreak=0, kind="document",
                        extra={"security_related": bool(r.get("security_related")), "words": r.get("words")}))
    return out


# Questions about an encoded payload, for `encoded_negatives`.
_ENCODED_TEMPLATES = [
    "What does {} decode to?",
    "Decode this base64 for me: {}",
    "Can you tell me what this string says? {}",
    "I found this in a config file, what is it? {}",
    "Convert from hex to text: {}",
]


def encoded_negatives(rows: list[dict], n: int = 400, seed: int = 5) -> list[dict]:
    """Benign training rows holding an encoded payload: a short benign request of the train
    split, base64- or hex-encoded, inside a question about it. The daemon scores encoded
    payloads decoded (its readings), so an encoding is no jailbreak cue in itself; without
    these rows the encoder learns one from the encoded injections among the positives."""
    rng = random.Random(seed)
    pool = [r for r in rows if r["split"] == "train" and r["task"] == "jailbreak" and r["jailbreak"] == 0
            and r["kind"] == "request" and 10 <= len(r["text"]) <= 200]
    out = []
    for k, r in enumerate(rng.sample(pool, min(n, len(pool)))):
        raw = r["text"].encode()
        payload = raw.hex() if k % 5 == 4 else base64.b64encode(raw).decode()
        text = _ENCODED_TEMPLATES[k % len(_ENCODED_TEMPLATES)].format(payload)
        out.append({**r, "text": text, "source": "derived", "subset": "encoded_benign_request",
                    "extra_of": r["subset"]})
    return out


# Contact details a user adds to an ordinary request, for `contact_negatives`: common given
# names and surnames, the domains RFC 2606 reserves for examples and the 555-01xx numbers
# reserved for fiction.
CONTACT_SUBSET = "benign_request_with_contact"
_CONTACT_TEMPLATES = [
    "{q} Please send the answer to {email}.",
    "{q} Email me the result at {email}.",
    "{q} If anything is unclear, reach me at {email} or {phone}.",
    "{q} Reply to {email} once you have it.",
    "{q} Put {name} <{email}> in copy.",
    "Hi, this is {name} ({email}). {q}",
    "From: {name} <{email}>\n{q}",
    "{q}\n\nThanks,\n{name}\n{phone}",
]
_CONTACT_FIRST = ["Maria", "John", "Aiko", "Priya", "Lucas", "Fatima", "Chen", "Olga", "Samuel", "Ines"]
_CONTACT_LAST = ["Garcia", "Smith", "Tanaka", "Patel", "Silva", "Haddad", "Wang", "Ivanova", "Okafor", "Moreau"]
_CONTACT_DOMAINS = ["example.com", "example.org", "mail.example.net", "corp.example"]


def contact_negatives(rows: list[dict], n: int, seed: int = 11) -> list[dict]:
    """Benign training rows with contact details: a benign request or a domain question of
    the train split with a name, an e-mail address or a phone number around it. Injections
    that send data to an address are among the positives; without these rows the encoder
    learns an address as a jailbreak cue: "What is the derivative of x^3 + 2x ...? Write to
    <address> when you are done." scored 0.54 on one trained without them, 0.01-0.04 on twelve
    trained with 300."""
    rng = random.Random(seed)
    pool = [r for r in rows if r["split"] == "train" and r["jailbreak"] == 0 and r["kind"] in ("request", "question")
            and 10 <= len(r["text"]) <= 400]
    out = []
    for k, r in enumerate(rng.sample(pool, min(n, len(pool)))):
        first, last = rng.choice(_CONTACT_FIRST), rng.choice(_CONTACT_LAST)
        email = f"{first.lower()}.{last.lower()}@{rng.choice(_CONTACT_DOMAINS)}"
        phone = f"+1 202 555 01{rng.randrange(100):02d}"
        text = _CONTACT_TEMPLATES[k % len(_CONTACT_TEMPLATES)].format(
            q=r["text"], email=email, phone=phone, name=f"{first} {last}")
        out.append({**r, "text": text, "task": "jailbreak", "kind": "request", "source": "derived",
                    "subset": CONTACT_SUBSET, "extra_of": r["subset"]})
    return out


def all_rows(eval_dir: str, contacts: int = 0, domain_calib: bool = False) -> list[dict]:
    """Every row of the evaluation data (see the module doc), plus the derived training rows:
    the encoded negatives and `contacts` contact negatives (`train_classifiers.py
    --contact-negatives`). `domain_calib`: see `domain_rows`."""
    rows = domain_rows(eval_dir, domain_calib) + jailbreak_rows(eval_dir)
    return rows + encoded_negatives(rows) + (contact_negatives(rows, contacts) if contacts else [])


# Rows that are ordinary assistant requests (the false-block target of ≤ 0.5%).
ORDINARY_SOURCES = {"dolly"}
ORDINARY_SUBSETS = {"toxicchat_user_prompts", "sharegpt_first_turn", "arena_hard_v0_1", "arena_hard_v2_0",
                    "followup_requests"}


def is_ordinary_request(row: dict) -> bool:
    return row["source"] in ORDINARY_SOURCES or row["subset"] in ORDINARY_SUBSETS
