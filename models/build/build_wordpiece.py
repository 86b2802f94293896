"""Train a BERT-style WordPiece vocabulary and write it as Hugging Face's tokenizer.json.

No npm package ships a BERT tokenizer.json, so Ferry's WordPiece tests (and a BERT-style
encoder trained here) read this one: a real vocabulary learnt from real text, in exactly the
format `BertTokenizerFast.save_pretrained` writes (BertNormalizer lowercasing and stripping
accents, BertPreTokenizer, the WordPiece model with `##` continuations, a TemplateProcessing
post-processor wrapping a text in [CLS] ... [SEP], the WordPiece decoder).

Data: the English fortune databases of Debian's `fortunes` and `fortunes-min` packages under
/usr/share/games/fortunes (apt-get install fortunes), as tiny-lm reads them.

Training is Hugging Face's WordPieceTrainer's: byte-pair merges by frequency over words split
into their first character and `##`-prefixed rest, every character seen kept as a base token.
Deterministic: the same corpus gives the same file.

Writes models/build/wordpiece/tokenizer.json and tokenizer_config.json, then checks that
wordpiece.py (what a model trained in Python reads) encodes every fortune and a multilingual
sample exactly as Ferry's @huggingface/tokenizers does (node, from the repository's root).
Run:  /usr/bin/python3 models/build/build_wordpiece.py   (VOCAB_SIZE, default 8192; seconds)
"""

import collections
import glob
import heapq
import json
import os
import subprocess

from wordpiece import WordPiece, normalize, pre_tokenize

VOCAB_SIZE = int(os.environ.get("VOCAB_SIZE", "8192"))
SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]
PREFIX = "##"
OUT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wordpiece")


def load_docs():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in os.path.basename(path) or os.path.islink(path) or os.path.isdir(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        docs.extend(d.strip("\n%") for d in text.split("\n%\n") if d.strip("\n%"))
    if not docs:
        raise SystemExit("no fortunes under /usr/share/games/fortunes: apt-get install fortunes")
    return docs


def word_counts(docs):
    counts = collections.Counter()
    for doc in docs:
        counts.update(pre_tokenize(normalize(doc)))
    return counts


def train(counts, size):
    """Merges the most frequent adjacent pair (ties: the first in sorted order) until `size`."""
    words = [[w[0], *(PREFIX + c for c in w[1:])] for w in counts]
    freqs = list(counts.values())
    seen = {s for symbols in words for s in symbols}
    # base characters in a fixed order: first characters, then continuations
    vocab = list(SPECIALS)
    vocab += sorted(s for s in seen if not s.startswith(PREFIX))
    vocab += sorted(s for s in seen if s.startswith(PREFIX))
    known = set(vocab)

    pairs = collections.Counter()
    where = collections.defaultdict(set)
    for i, symbols in enumerate(words):
        for a, b in zip(symbols, symbols[1:]):
            pairs[a, b] += freqs[i]
            where[a, b].add(i)
    heap = [(-n, p) for p, n in pairs.items()]
    heapq.heapify(heap)

    while len(vocab) < size and heap:
        n, pair = heapq.heappop(heap)
        if pairs.get(pair, 0) != -n or n == 0:
            continue  # stale entry: the count changed since it was pushed
        a, b = pair
        merged = a + b[len(PREFIX) :]
        changed = collections.Counter()
        for i in sorted(where.pop(pair)):
            symbols = words[i]
            out, j = [], 0
            while j < len(symbols):
                if j + 1 < len(symbols) and symbols[j] == a and symbols[j + 1] == b:
                    out.append(merged)
                    j += 2
                else:
                    out.append(symbols[j])
                    j += 1
            if out == symbols:
                continue
            for p in zip(symbols, symbols[1:]):
                changed[p] -= freqs[i]
            for p in zip(out, out[1:]):
                changed[p] += freqs[i]
                where[p].add(i)
            words[i] = out
        for p, delta in changed.items():
            if delta:
                pairs[p] += delta
                if pairs[p] > 0:
                    heapq.heappush(heap, (-pairs[p], p))
                else:
                    del pairs[p]
        pairs.pop(pair, None)
        if merged not in known:
            known.add(merged)
            vocab.append(merged)
    return vocab


def tokenizer_json(vocab):
    ids = {t: i for i, t in enumerate(vocab)}
    special = lambda t, type_id: {"SpecialToken": {"id": t, "type_id": type_id}}
    sequence = lambda s, type_id: {"Sequence": {"id": s, "type_id": type_id}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [
            {
                "id": ids[t],
                "content": t,
                "single_word": False,
                "lstrip": False,
                "rstrip": False,
                "normalized": False,
                "special": True,
            }
            for t in SPECIALS
        ],
        "normalizer": {
            "type": "BertNormalizer",
            "clean_text": True,
            "handle_chinese_chars": True,
            "strip_accents": None,
            "lowercase": True,
        },
        "pre_tokenizer": {"type": "BertPreTokenizer"},
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [special("[CLS]", 0), sequence("A", 0), special("[SEP]", 0)],
            "pair": [
                special("[CLS]", 0),
                sequence("A", 0),
                special("[SEP]", 0),
                sequence("B", 1),
                special("[SEP]", 1),
            ],
            "special_tokens": {
                t: {"id": t, "ids": [ids[t]], "tokens": [t]} for t in ("[CLS]", "[SEP]")
            },
        },
        "decoder": {"type": "WordPiece", "prefix": PREFIX, "cleanup": True},
        "model": {
            "type": "WordPiece",
            "unk_token": "[UNK]",
            "continuing_subword_prefix": PREFIX,
            "max_input_chars_per_word": 100,
            "vocab": ids,
        },
    }


def tokenizer_config():
    return {
        "tokenizer_class": "BertTokenizer",
        "do_lower_case": True,
        "tokenize_chinese_chars": True,
        "strip_accents": None,
        "clean_up_tokenization_spaces": True,
        "model_max_length": 512,
        "pad_token": "[PAD]",
        "unk_token": "[UNK]",
        "cls_token": "[CLS]",
        "sep_token": "[SEP]",
        "mask_token": "[MASK]",
    }


# scripts, accents, CJK, emoji, controls and widths the English corpus lacks
SAMPLES = [
    "Café, naïve résumé — déjà vu; Ærøskøbing, Dvořák, Łódź, İstanbul",
    "你好，世界！東京は日本の首都です。한국어 텍스트",
    "Emoji: 👋🏽 🇫🇷 👨‍👩‍👧‍👦 ❤️ and مرحبا بالعالم",
    "def f(x):\n\treturn x ** 2  # square\r\n\x07bell\u200bzero\u00a0nbsp Ｆｕｌｌ 𠀋",
]

CHECK_JS = """
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";
const dir = process.argv[1];
const tok = new Tokenizer(JSON.parse(readFileSync(dir + "/tokenizer.json", "utf8")), {});
const texts = JSON.parse(readFileSync(0, "utf8"));
process.stdout.write(JSON.stringify(texts.map((t) => tok.encode(t).ids)));
"""


def check_against_library(texts):
    """Python's encoding of `texts` against @huggingface/tokenizers' (as Ferry serves it)."""
    root = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
    out = subprocess.run(
        ["node", "--input-type=module", "-e", CHECK_JS, OUT_DIR],
        input=json.dumps(texts).encode(),
        capture_output=True,
        cwd=root,
        check=True,
    ).stdout
    tok = WordPiece.load(os.path.join(OUT_DIR, "tokenizer.json"))
    theirs = json.loads(out)
    wrong = [t for t, ids in zip(texts, theirs) if tok.encode(t) != ids]
    if wrong:
        raise SystemExit(f"wordpiece.py and @huggingface/tokenizers differ on {len(wrong)} texts, first: {wrong[0]!r}")


def main():
    docs = load_docs()
    counts = word_counts(docs)
    vocab = train(counts, VOCAB_SIZE)
    os.makedirs(OUT_DIR, exist_ok=True)
    for name, data in (("tokenizer.json", tokenizer_json(vocab)), ("tokenizer_config.json", tokenizer_config())):
        with open(os.path.join(OUT_DIR, name), "w", encoding="utf-8") as f:
            json.dump(data, f, ensure_ascii=False, indent=2 if name != "tokenizer.json" else None)
            f.write("\n")
    check_against_library(docs + SAMPLES)
    print(f"{len(docs)} fortunes, {len(counts)} distinct words -> {len(vocab)} tokens in {OUT_DIR}")
    print("wordpiece.py encodes all of them as @huggingface/tokenizers does")


if __name__ == "__main__":
    main()
