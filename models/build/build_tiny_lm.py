"""Train tiny-lm, a byte-level decoder-only transformer, and export it with a KV cache.

Data: the English fortune databases that Debian's `fortunes` package ships under
/usr/share/games/fortunes (nothing is downloaded). Each fortune is one document ending in the
end-of-text token 256. The export follows Hugging Face Optimum's decoder naming so that a
user's own Optimum export drops into models/ the same way:

    inputs : input_ids [b, s] int64, attention_mask [b, past + s] int64,
             position_ids [b, s] int64, past_key_values.{i}.key|value [b, heads, past, head_dim]
    outputs: logits [b, s, vocab], present.{i}.key|value [b, heads, past + s, head_dim]

Run:  nice /usr/bin/python3 models/build/build_tiny_lm.py   (TRAIN_MINUTES, TORCH_THREADS)
"""

import glob
import json
import math
import os
import random
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

from common import MODELS_DIR

VOCAB = 257  # 256 bytes + end-of-text
EOS = 256
CONFIG = {"n_layer": 4, "n_head": 4, "d_model": 128, "context_length": 256}
OUT_DIR = os.path.join(MODELS_DIR, "tiny-lm")
CKPT = os.path.join(os.path.dirname(__file__), ".tiny-lm.ckpt")


class Block(nn.Module):
    def __init__(self, d, n_head):
        super().__init__()
        self.n_head = n_head
        self.ln1 = nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))

    def forward(self, x, bias, past_k, past_v):
        b, s, d = x.shape
        hd = d // self.n_head
        q, k, v = self.qkv(self.ln1(x)).split(d, dim=2)
        q = q.view(b, s, self.n_head, hd).transpose(1, 2)
        k = torch.cat([past_k, k.view(b, s, self.n_head, hd).transpose(1, 2)], dim=2)
        v = torch.cat([past_v, v.view(b, s, self.n_head, hd).transpose(1, 2)], dim=2)
        att = (q @ k.transpose(-1, -2)) * (1.0 / math.sqrt(hd)) + bias
        y = (att.softmax(dim=-1) @ v).transpose(1, 2).reshape(b, s, d)
        x = x + self.proj(y)
        return x + self.mlp(self.ln2(x)), k, v


class TinyLM(nn.Module):
    def __init__(self, n_layer, n_head, d_model, context_length):
        super().__init__()
        self.n_head = n_head
        self.tok = nn.Embedding(VOCAB, d_model)
        self.pos = nn.Embedding(context_length, d_model)
        self.blocks = nn.ModuleList(Block(d_model, n_head) for _ in range(n_layer))
        self.ln_f = nn.LayerNorm(d_model)
        self.head = nn.Linear(d_model, VOCAB, bias=False)
        self.head.weight = self.tok.weight  # tied embeddings keep the file small
        self.apply(self._init)

    @staticmethod
    def _init(m):
        # GPT-2's init: unit-variance embeddings would make the tied head's logits explode
        if isinstance(m, (nn.Linear, nn.Embedding)):
            nn.init.normal_(m.weight, std=0.02)
        if isinstance(m, nn.Linear) and m.bias is not None:
            nn.init.zeros_(m.bias)

    def forward(self, input_ids, attention_mask, position_ids, past):
        """past: list of (key, value) per layer; returns logits and the new (key, value)s."""
        s = input_ids.shape[1]
        total = attention_mask.shape[1]
        past_len = total - s
        # query i sits at absolute slot past_len + i and may see every valid slot up to it
        key_idx = torch.arange(total).unsqueeze(0)
        query_idx = torch.arange(s).unsqueeze(1) + past_len
        visible = (key_idx <= query_idx).unsqueeze(0).unsqueeze(0) & (
            attention_mask.unsqueeze(1).unsqueeze(2) > 0
        )
        bias = torch.where(visible, torch.zeros(()), torch.full((), -1e9))
        x = self.tok(input_ids) + self.pos(position_ids)
        present = []
        for block, (pk, pv) in zip(self.blocks, past):
            x, k, v = block(x, bias, pk, pv)
            present.append((k, v))
        return self.head(self.ln_f(x)), present

    def empty_past(self, batch):
        d = self.tok.embedding_dim
        shape = (batch, self.n_head, 0, d // self.n_head)
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in self.blocks]


class Exported(nn.Module):
    """Flat-argument wrapper so torch.onnx.export sees Optimum's input and output lists."""

    def __init__(self, lm):
        super().__init__()
        self.lm = lm

    def forward(self, input_ids, attention_mask, position_ids, *flat_past):
        past = [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(len(flat_past) // 2)]
        logits, present = self.lm(input_ids, attention_mask, position_ids, past)
        return (logits, *[t for kv in present for t in kv])


def load_corpus():
    docs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in os.path.basename(path) or os.path.islink(path) or os.path.isdir(path):
            continue
        with open(path, "rb") as f:
            text = f.read()
        for doc in text.split(b"\n%\n"):
            doc = doc.strip(b"\n%")
            if doc:
                docs.append(list(doc) + [EOS])
    random.Random(0).shuffle(docs)
    n_val = max(1, len(docs) // 20)
    flat = lambda ds: torch.tensor([t for d in ds for t in d], dtype=torch.long)
    return flat(docs[n_val:]), flat(docs[:n_val])


def batches(data, batch, ctx, gen):
    starts = torch.randint(0, data.numel() - ctx - 1, (batch,), generator=gen)
    x = torch.stack([data[s : s + ctx] for s in starts.tolist()])
    y = torch.stack([data[s + 1 : s + ctx + 1] for s in starts.tolist()])
    return x, y


def loss_on(model, x, y):
    b, s = x.shape
    logits, _ = model(x, torch.ones(b, s, dtype=torch.long), torch.arange(s).expand(b, s), model.empty_past(b))
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1))


@torch.no_grad()
def evaluate(model, val, ctx, n_batches=20):
    model.eval()
    gen = torch.Generator().manual_seed(1234)
    losses = [float(loss_on(model, *batches(val, 32, ctx, gen))) for _ in range(n_batches)]
    model.train()
    return sum(losses) / len(losses)


def train(model, train_data, val, minutes):
    # Short windows first: many more optimizer steps per minute on a 2-core box; the last
    # stretch trains at full length so every position embedding is learned.
    full_ctx = CONFIG["context_length"]
    peak = float(os.environ.get("LR", "3e-3"))  # a resumed run wants a lower peak, e.g. 8e-4
    short = float(os.environ.get("SHORT_CTX_FRACTION", "0.7"))
    opt = torch.optim.AdamW(model.parameters(), lr=peak, weight_decay=0.05, betas=(0.9, 0.98))
    gen = torch.Generator().manual_seed(0)
    start, step, best = time.time(), 0, float("inf")
    budget = minutes * 60
    warmup = 200
    while (elapsed := time.time() - start) < budget:
        frac = elapsed / budget
        lr = peak * min(1.0, (step + 1) / warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        ctx, bsz = (full_ctx // 2, 24) if frac < short else (full_ctx, 12)
        loss = loss_on(model, *batches(train_data, bsz, ctx, gen))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 250 == 0:
            v = evaluate(model, val, full_ctx)
            print(f"step {step} {elapsed / 60:.1f} min train {float(loss):.3f} val {v:.3f} lr {lr:.2e}", flush=True)
            if v < best:
                best = v
                torch.save(model.state_dict(), CKPT)
    return step


@torch.no_grad()
def check_cache_matches_full(model):
    """Greedy decoding with the KV cache must equal recomputing the whole sequence."""
    model.eval()
    ids = list(b"The ")
    past = model.empty_past(1)
    x = torch.tensor([ids])
    cached = []
    mask = torch.ones(1, len(ids), dtype=torch.long)
    logits, past = model(x, mask, torch.arange(len(ids)).unsqueeze(0), past)
    for _ in range(20):
        nxt = int(logits[0, -1].argmax())
        cached.append(nxt)
        pos = mask.shape[1]
        mask = torch.ones(1, pos + 1, dtype=torch.long)
        logits, past = model(torch.tensor([[nxt]]), mask, torch.tensor([[pos]]), past)
    full_ids = list(ids)
    for _ in range(20):
        n = len(full_ids)
        logits, _ = model(torch.tensor([full_ids]), torch.ones(1, n, dtype=torch.long), torch.arange(n).unsqueeze(0), model.empty_past(1))
        full_ids.append(int(logits[0, -1].argmax()))
    assert cached == full_ids[len(ids):], (cached, full_ids)
    return bytes(t for t in cached if t < 256).decode("utf-8", "replace")


def export(model, val_loss, steps, minutes):
    os.makedirs(os.path.join(OUT_DIR, "1"), exist_ok=True)
    path = os.path.join(OUT_DIR, "1", "model.onnx")
    n_layer, n_head, d = CONFIG["n_layer"], CONFIG["n_head"], CONFIG["d_model"]
    b, s, past_len = 2, 3, 4
    past = [torch.zeros(b, n_head, past_len, d // n_head) for _ in range(2 * n_layer)]
    args = (
        torch.zeros(b, s, dtype=torch.long),
        torch.ones(b, past_len + s, dtype=torch.long),
        torch.arange(past_len, past_len + s).expand(b, s),
        *past,
    )
    past_names = [f"past_key_values.{i}.{kv}" for i in range(n_layer) for kv in ("key", "value")]
    present_names = [f"present.{i}.{kv}" for i in range(n_layer) for kv in ("key", "value")]
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
    }
    axes.update({n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names})
    axes.update({n: {0: "batch_size", 2: "total_sequence_length"} for n in present_names})
    torch.onnx.export(
        Exported(model).eval(),
        args,
        path,
        input_names=["input_ids", "attention_mask", "position_ids", *past_names],
        output_names=["logits", *present_names],
        dynamic_axes=axes,
        opset_version=17,
    )
    size = os.path.getsize(path)
    assert size < 10 * 1024 * 1024, f"{path} is {size} bytes"
    params = sum(p.numel() for p in model.parameters())
    json_path = os.path.join(OUT_DIR, "model.json")
    if os.environ.get("RESUME") and os.path.exists(json_path):
        # a resumed run reports the training of every run together
        with open(json_path) as f:
            before = json.load(f)["versions"]["1"]
        steps += before.get("train_steps", 0)
        minutes += before.get("train_minutes", 0)
    config = {
        "name": "tiny-lm",
        "kind": "generator",
        "platform": "onnxruntime_onnx",
        "description": "Byte-level decoder-only transformer trained on Debian's fortune databases",
        "tokenizer": {"type": "byte", "eos_token_id": EOS},
        "architecture": {**CONFIG, "vocab_size": VOCAB, "head_dim": d // n_head, "params": params},
        "inputs": [
            {"name": "input_ids", "datatype": "INT64", "dims": [-1]},
            {"name": "attention_mask", "datatype": "INT64", "dims": [-1]},
            {"name": "position_ids", "datatype": "INT64", "dims": [-1]},
        ],
        "outputs": [{"name": "logits", "datatype": "FP32", "dims": [-1, VOCAB]}],
        "max_batch_size": 16,
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 2048},
        "instance_count": 1,
        "intra_op_threads": 1,
        "max_queue_size": 256,
        "default_timeout_ms": 120000,
        "versions": {"1": {"val_loss_nats_per_byte": round(val_loss, 4), "train_steps": steps, "train_minutes": minutes}},
        "stable_version": "1",
    }
    with open(os.path.join(OUT_DIR, "model.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")
    print(f"exported {path} ({size} bytes, {params} params)")


def main():
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    minutes = float(os.environ.get("TRAIN_MINUTES", "45"))
    train_data, val = load_corpus()
    print(f"corpus: {train_data.numel()} train bytes, {val.numel()} validation bytes", flush=True)
    model = TinyLM(**CONFIG)
    if os.environ.get("RESUME") and os.path.exists(CKPT):
        model.load_state_dict(torch.load(CKPT))
        print(f"resumed from {CKPT}: validation loss {evaluate(model, val, CONFIG['context_length']):.4f}", flush=True)
    steps = train(model, train_data, val, minutes) if minutes > 0 else 0
    if os.path.exists(CKPT):
        model.load_state_dict(torch.load(CKPT))
    val_loss = evaluate(model, val, CONFIG["context_length"], n_batches=50)
    print(f"validation loss {val_loss:.4f} nats/byte", flush=True)
    print("greedy sample:", repr(check_cache_matches_full(model)), flush=True)
    export(model, val_loss, steps, minutes)


if __name__ == "__main__":
    main()
