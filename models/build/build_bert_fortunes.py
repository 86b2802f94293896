"""Train bert-fortunes, a small BERT-style sentence encoder, and export it for Ferry's embedder.

Architecture: BERT's (token, position and token-type embeddings summed and layer-normed, then
post-LN transformer encoder layers of multi-head self-attention under the attention mask and a
GELU feed-forward), 3 layers, 4 heads, hidden 128, feed-forward 512, 128 positions, over the
8,192-token WordPiece vocabulary of models/build/wordpiece (read through wordpiece.py, which
encodes every fortune exactly as Ferry's @huggingface/tokenizers does).

Data: the English fortune databases of Debian's `fortunes` package under
/usr/share/games/fortunes (apt-get install fortunes; nothing is downloaded), deduplicated.
Word embeddings start from latent semantic analysis of the training fortunes (a truncated SVD
of their document-by-token counts, strongest component first), the rest of the encoder from
BERT's random initialisation. Objective: contrastive, as sentence-transformers'
MultipleNegativesRankingLoss / SimCSE's supervised form: a fortune cut in two at a random word
near its middle makes a pair, every other fortune's half in the batch is a negative; mean
pooling, cosine similarity over a temperature, cross-entropy both ways, at widths 32, 64 and
128 together (Matryoshka representation learning, so that a request's `dimensions` may cut a
vector). Two halves of one fortune share a topic and a voice, seldom words, so the pair is
learnt from meaning more than from overlap. On two shared cores (Debian's torch computes with
a generic BLAS) a step of 64 halves takes seconds, so the few minutes of training are a few
hundred steps.

Held out: 1,000 fortunes never trained on (nor read by the LSA), each cut at its middle word.
The figure recorded in model.json is retrieval over them: each first half ranks all 1,000 second
halves by cosine similarity; recall@1, recall@10 and MRR, beside a random ranking's (1/1000 and
H(1000)/1000), the same encoder before any training (random weights: mean pooling of random
word vectors already matches shared words) and after its LSA start, and recall@1 at 32 and 64
dimensions.

Export: inputs input_ids, attention_mask, token_type_ids int64 [batch, sequence]; output
last_hidden_state float32 [batch, sequence, 128] (as Optimum exports a BERT): Ferry's worker
pools (mean, per model.json) and normalizes. Also writes models/bert-fortunes/reference.json:
a few held-out texts, their ids and their CLS / mean / last-token pooled vectors as PyTorch
computes them, which Ferry's tests compare with what ONNX Runtime and the worker give.

Run:  nice /usr/bin/python3 models/build/build_bert_fortunes.py   (TRAIN_MINUTES, default 8)
"""

import glob
import json
import math
import os
import random
import shutil
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MODELS_DIR, assert_committable
from wordpiece import WordPiece

NAME = "bert-fortunes"
CONFIG = {"vocab_size": 8192, "hidden_size": 128, "num_hidden_layers": 3, "num_attention_heads": 4,
          "intermediate_size": 512, "max_position_embeddings": 128, "type_vocab_size": 2}
MAX_TOKENS = CONFIG["max_position_embeddings"]
TEMPERATURE = 0.05
MATRYOSHKA = [32, 64, 128]
HELD_OUT = 1000
OUT_DIR = os.path.join(MODELS_DIR, NAME)
WORDPIECE_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "wordpiece")
PAD, CLS, SEP = 0, 2, 3


class Layer(nn.Module):
    """One BERT encoder layer (post-LN): attention, add and norm; feed-forward, add and norm."""

    def __init__(self, d, heads, ffn, dropout):
        super().__init__()
        self.heads = heads
        self.qkv = nn.Linear(d, 3 * d)
        self.attn_out = nn.Linear(d, d)
        self.ln1 = nn.LayerNorm(d, eps=1e-12)
        self.ff_in = nn.Linear(d, ffn)
        self.ff_out = nn.Linear(ffn, d)
        self.ln2 = nn.LayerNorm(d, eps=1e-12)
        self.drop = nn.Dropout(dropout)

    def forward(self, x, bias):
        b, s, d = x.shape
        hd = d // self.heads
        q, k, v = (t.view(b, s, self.heads, hd).transpose(1, 2) for t in self.qkv(x).split(d, dim=2))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd) + bias
        y = (self.drop(att.softmax(dim=-1)) @ v).transpose(1, 2).reshape(b, s, d)
        x = self.ln1(x + self.drop(self.attn_out(y)))
        return self.ln2(x + self.drop(self.ff_out(F.gelu(self.ff_in(x)))))


class Encoder(nn.Module):
    def __init__(self, vocab_size, hidden_size, num_hidden_layers, num_attention_heads,
                 intermediate_size, max_position_embeddings, type_vocab_size, dropout=0.1):
        super().__init__()
        self.word = nn.Embedding(vocab_size, hidden_size, padding_idx=PAD)
        self.position = nn.Embedding(max_position_embeddings, hidden_size)
        self.token_type = nn.Embedding(type_vocab_size, hidden_size)
        self.ln = nn.LayerNorm(hidden_size, eps=1e-12)
        self.drop = nn.Dropout(dropout)
        self.layers = nn.ModuleList(
            Layer(hidden_size, num_attention_heads, intermediate_size, dropout) for _ in range(num_hidden_layers)
        )
        self.apply(self._init)

    @staticmethod
    def _init(m):
        # BERT's initializer range
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, input_ids, attention_mask, token_type_ids):
        s = input_ids.shape[1]
        positions = torch.arange(s).unsqueeze(0)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.drop(self.ln(x))
        # a padded key is never attended to; a padded query's own row is ignored by pooling
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -1e9
        for layer in self.layers:
            x = layer(x, bias)
        return x


def mean_pool(hidden, mask):
    m = mask.unsqueeze(-1).to(hidden.dtype)
    return (hidden * m).sum(1) / m.sum(1).clamp(min=1e-9)


def load_fortunes():
    docs, seen = [], set()
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in os.path.basename(path) or os.path.islink(path) or os.path.isdir(path):
            continue
        with open(path, "rb") as f:
            text = f.read().decode("utf-8", errors="replace")
        for doc in text.split("\n%\n"):
            doc = doc.strip("\n%")
            key = " ".join(doc.lower().split())
            if doc and key not in seen:
                seen.add(key)
                docs.append(doc)
    if not docs:
        raise SystemExit("no fortunes under /usr/share/games/fortunes: apt-get install fortunes")
    return docs


def word_tokens(tok, doc):
    """Token ids per whitespace-separated word: a half's ids are its words' ids joined, as
    BERT's pre-tokenizer splits at whitespace before anything else."""
    return [ids for ids in ([tok.vocab[p] for p in tok.tokenize(w)] for w in doc.split()) if ids]


def with_specials(words, most=MAX_TOKENS):
    ids = [t for w in words for t in w][: most - 2]
    return [CLS, *ids, SEP]


def pad(seqs):
    n = max(len(s) for s in seqs)
    ids = torch.tensor([s + [PAD] * (n - len(s)) for s in seqs])
    mask = torch.tensor([[1] * len(s) + [0] * (n - len(s)) for s in seqs])
    return ids, mask, torch.zeros_like(ids)


def embed(model, seqs, batch=256):
    out = []
    for i in range(0, len(seqs), batch):
        ids, mask, types = pad(seqs[i : i + batch])
        out.append(F.normalize(mean_pool(model(ids, mask, types), mask), dim=-1))
    return torch.cat(out)


@torch.no_grad()
def retrieval(model, pairs, width=None):
    """Each first half ranks every second half: recall@1, recall@10 and MRR (on the first
    `width` values of each vector, normalized again, where given)."""
    model.eval()
    q = embed(model, [a for a, _ in pairs])
    k = embed(model, [b for _, b in pairs])
    if width is not None:
        q, k = F.normalize(q[:, :width], dim=-1), F.normalize(k[:, :width], dim=-1)
    sims = q @ k.T
    rank = (sims > sims.diag().unsqueeze(1)).sum(1) + 1  # 1 = the right half came first
    model.train()
    return {
        "recall_at_1": float((rank == 1).float().mean()),
        "recall_at_10": float((rank <= 10).float().mean()),
        "mrr": float((1.0 / rank.float()).mean()),
    }


def lsa_vectors(docs, vocab_size, dim, seed=0):
    """Token vectors from the training fortunes' co-occurrence (latent semantic analysis: a
    truncated SVD of log-scaled, idf-weighted document-by-token counts), each of unit length.
    Two halves of one fortune share a topic more than words, and a word's topic is what
    LSA captures; it gives the encoder's word embeddings a start that a few minutes of
    contrastive training on two shared cores could not reach from random."""
    import numpy as np
    from scipy.sparse import csr_matrix
    from scipy.sparse.linalg import svds

    rows, cols, vals = [], [], []
    for i, words in enumerate(docs):
        counts = {}
        for w in words:
            for t in w:
                counts[t] = counts.get(t, 0) + 1
        for t, n in counts.items():
            rows.append(i)
            cols.append(t)
            vals.append(1.0 + math.log(n))
    m = csr_matrix((vals, (rows, cols)), shape=(len(docs), vocab_size), dtype=np.float64)
    df = np.bincount(cols, minlength=vocab_size)
    idf = np.log((1 + len(docs)) / (1 + df)) + 1
    m = m.multiply(idf.reshape(1, -1)).tocsr()
    _, sing, vt = svds(m, k=dim, random_state=seed)
    # strongest component first (svds answers them weakest first): a vector's leading values
    # then carry the most, which is what a Matryoshka cut keeps
    order = np.argsort(-sing)
    vectors = (vt[order].T * sing[order]).astype(np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    seen = (df > 0) & (norms[:, 0] > 0)
    vectors[seen] /= norms[seen]
    return torch.from_numpy(vectors), torch.from_numpy(seen)


def init_from_lsa(model, docs):
    vectors, seen = lsa_vectors(docs, CONFIG["vocab_size"], CONFIG["hidden_size"])
    with torch.no_grad():
        word = model.word.weight
        word[seen] = vectors[seen]
        word[PAD] = 0


def train(model, docs, held_out, minutes, batch=32, window=256, most=40):
    """Batches drawn from a window of fortunes of about one length (padding is most of the
    cost of a batch on two shared cores), halves cut to `most` tokens while training."""
    peak = float(os.environ.get("LR", "1e-3"))
    opt = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=0.01)
    rng = random.Random(0)
    docs = sorted(docs, key=lambda words: sum(len(w) for w in words))
    start, step = time.time(), 0
    budget, warmup = minutes * 60, 20
    while (elapsed := time.time() - start) < budget:
        frac = elapsed / budget
        lr = peak * min(1.0, (step + 1) / warmup) * 0.5 * (1 + math.cos(math.pi * frac))
        for g in opt.param_groups:
            g["lr"] = lr
        queries, keys = [], []
        at = rng.randrange(0, len(docs) - window)
        for words in rng.sample(docs[at : at + window], batch):
            cut = rng.randint(max(1, int(len(words) * 0.3)), max(1, int(len(words) * 0.7)))
            queries.append(with_specials(words[:cut], most))
            keys.append(with_specials(words[cut:], most))
        ids, mask, types = pad(queries + keys)
        pooled = mean_pool(model(ids, mask, types), mask)
        labels = torch.arange(batch)
        loss = 0
        # Matryoshka: each prefix of the vector trained to stand on its own, so a request's
        # `dimensions` may cut it
        for width in MATRYOSHKA:
            cut = F.normalize(pooled[:, :width], dim=-1)
            logits = cut[:batch] @ cut[batch:].T / TEMPERATURE
            loss = loss + (F.cross_entropy(logits, labels) + F.cross_entropy(logits.T, labels)) / 2
        loss = loss / len(MATRYOSHKA)
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 100 == 0:
            r = retrieval(model, held_out)
            print(f"step {step} {elapsed / 60:.1f} min loss {float(loss):.3f} held-out recall@1 {r['recall_at_1']:.3f} mrr {r['mrr']:.3f}", flush=True)
    return step


class Exported(nn.Module):
    """The encoder in eval mode under Optimum's BERT names."""

    def __init__(self, encoder):
        super().__init__()
        self.encoder = encoder

    def forward(self, input_ids, attention_mask, token_type_ids):
        return self.encoder(input_ids, attention_mask, token_type_ids)


def export(model, path):
    ids, mask, types = pad([[CLS, 10, 11, SEP], [CLS, 12, SEP]])
    axes = {n: {0: "batch_size", 1: "sequence_length"} for n in ("input_ids", "attention_mask", "token_type_ids", "last_hidden_state")}
    torch.onnx.export(
        Exported(model).eval(),
        (ids, mask, types),
        path,
        input_names=["input_ids", "attention_mask", "token_type_ids"],
        output_names=["last_hidden_state"],
        dynamic_axes=axes,
        opset_version=17,
        do_constant_folding=True,
    )
    assert_committable(path)


@torch.no_grad()
def reference(model, tok, texts):
    """Each text alone (no padding) through PyTorch: what the worker must give, batched or not."""
    model.eval()
    rows = []
    for text in texts:
        ids = tok.encode(text)
        t = torch.tensor([ids])
        hidden = model(t, torch.ones_like(t), torch.zeros_like(t))[0]
        pooled = {"cls": hidden[0], "mean": hidden.mean(0), "last": hidden[-1]}
        rows.append({"text": text, "ids": ids, "pooled": {k: [round(float(x), 7) for x in v] for k, v in pooled.items()}})
    return rows


def main():
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    minutes = float(os.environ.get("TRAIN_MINUTES", "8"))
    tok = WordPiece.load(os.path.join(WORDPIECE_DIR, "tokenizer.json"))
    docs = load_fortunes()
    random.Random(0).shuffle(docs)
    split = [(d, word_tokens(tok, d)) for d in docs]
    split = [(d, w) for d, w in split if len(w) >= 6]
    held, trained = split[:HELD_OUT], split[HELD_OUT:]
    held_pairs = [(with_specials(w[: len(w) // 2]), with_specials(w[len(w) // 2 :])) for _, w in held]
    print(f"{len(docs)} distinct fortunes: {len(trained)} to train on, {len(held)} held out", flush=True)

    model = Encoder(**CONFIG)
    before = retrieval(model, held_pairs)
    print(f"random init: {before}", flush=True)
    init_from_lsa(model, [w for _, w in trained])
    lsa = retrieval(model, held_pairs)
    print(f"word embeddings from LSA: {lsa}", flush=True)
    steps = train(model, [w for _, w in trained], held_pairs, minutes)
    model.eval()
    after = retrieval(model, held_pairs)
    narrow = {w: retrieval(model, held_pairs, w) for w in MATRYOSHKA[:-1]}
    print(f"matryoshka widths: {narrow}", flush=True)
    harmonic = sum(1 / k for k in range(1, HELD_OUT + 1))
    print(f"held-out retrieval over {HELD_OUT}: {after} (random init {before}, LSA init {lsa})", flush=True)

    os.makedirs(os.path.join(OUT_DIR, "1"), exist_ok=True)
    path = os.path.join(OUT_DIR, "1", "model.onnx")
    export(model, path)
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(os.path.join(WORDPIECE_DIR, name), os.path.join(OUT_DIR, name))
    texts = [held[0][0], held[1][0], "Hello, world!", "Ærøskøbing café: déjà vu."]
    with open(os.path.join(OUT_DIR, "reference.json"), "w") as f:
        json.dump({"note": "PyTorch's pooled last_hidden_state per text, each run alone; written by models/build/build_bert_fortunes.py",
                   "rows": reference(model, tok, texts)}, f)
        f.write("\n")

    params = sum(p.numel() for p in model.parameters())
    hidden = CONFIG["hidden_size"]
    config = {
        "name": NAME,
        "kind": "embedder",
        "platform": "onnxruntime_onnx",
        "description": "BERT-style sentence encoder (3 layers, hidden 128) trained contrastively on Debian's fortunes; mean-pooled, normalized",
        "inputs": [
            {"name": "input_ids", "datatype": "INT64", "dims": [-1]},
            {"name": "attention_mask", "datatype": "INT64", "dims": [-1]},
            {"name": "token_type_ids", "datatype": "INT64", "dims": [-1]},
        ],
        "outputs": [{"name": "last_hidden_state", "datatype": "FP32", "dims": [-1, hidden]}],
        "tokenizer": {"type": "huggingface", "file": "tokenizer.json"},
        "embedding": {
            "pooling": "mean",
            "normalize": True,
            "max_tokens": MAX_TOKENS,
            "matryoshka_dimensions": MATRYOSHKA,
            "max_batch_tokens": 4096,
            "max_inputs": 512,
            "max_request_tokens": 16384,
        },
        "architecture": {**CONFIG, "params": params},
        "max_batch_size": 64,
        "dynamic_batching": {"preferred_batch_sizes": [], "max_queue_delay_ms": 2},
        "instance_count": 1,
        "intra_op_threads": 1,
        # one request's inputs are rows of the queue: room for several of the largest
        "max_queue_size": 4096,
        "default_timeout_ms": 30000,
        "versions": {"1": {
            "held_out_pairs": HELD_OUT,
            **{f"recall_at_1_dimensions_{w}": round(r["recall_at_1"], 4) for w, r in narrow.items()},
            "recall_at_1": round(after["recall_at_1"], 4),
            "recall_at_10": round(after["recall_at_10"], 4),
            "mrr": round(after["mrr"], 4),
            "random_recall_at_1": round(1 / HELD_OUT, 4),
            "random_mrr": round(harmonic / HELD_OUT, 4),
            "random_init_recall_at_1": round(before["recall_at_1"], 4),
            "random_init_mrr": round(before["mrr"], 4),
            "lsa_init_recall_at_1": round(lsa["recall_at_1"], 4),
            "lsa_init_mrr": round(lsa["mrr"], 4),
            "train_steps": steps,
            "train_minutes": minutes,
        }},
        "stable_version": "1",
    }
    with open(os.path.join(OUT_DIR, "model.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(f"exported {path} ({os.path.getsize(path)} bytes, {params} params)")


if __name__ == "__main__":
    main()
