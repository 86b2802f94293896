"""Teach tiny-lm to answer in turns: fine-tune the shipped model on chat-shaped fortunes.

The weights come from the committed models/tiny-lm/1/model.onnx (nothing is downloaded and no
checkpoint is needed): they are read back into the PyTorch module of build_tiny_lm.py, checked
against ONNX Runtime-free recomputation of the ONNX graph's own outputs, fine-tuned, and
exported again with the same Optimum interface.

Data, all from Debian's `fortunes` package: every `Q: ... A: ...` piece becomes a user
question and an assistant answer; short fortunes become answers to a few generic requests
("Tell me a fortune."), some with a system line. Each example is rendered exactly as the
model's chat template (CHAT_TEMPLATE below, also written to model.json) renders it, and the
answer ends with the end-of-text token, so a chat answer stops at the end of its turn.
Original fortune windows are mixed in so the model keeps what it knew.

Run:  nice /usr/bin/python3 models/build/build_tiny_lm_chat.py   (CHAT_MINUTES, TORCH_THREADS)
"""

import glob
import json
import os
import random
import re
import time

import numpy as np
import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

from build_tiny_lm import CONFIG, EOS, OUT_DIR, VOCAB, TinyLM, batches, export, load_corpus, loss_on

# Byte-level, so the turns are marked in plain text; the end of an assistant turn is the
# end-of-text token the sampler stops on (text cannot carry it, so earlier turns end in "\n").
# An earlier answer is written as the model wrote it after "A:": one space, then the text (an
# answer comes back with that space at its start, which the template trims).
CHAT_TEMPLATE = (
    "{%- for message in messages -%}"
    "{%- if message['role'] == 'system' or message['role'] == 'developer' -%}"
    "{{ 'System: ' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'user' -%}"
    "{{ 'Q: ' + message['content'] + '\\n' }}"
    "{%- elif message['role'] == 'assistant' -%}"
    "{{ 'A: ' + (message['content'] | trim) + '\\n' }}"
    "{%- endif -%}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ 'A:' }}{%- endif -%}"
)
REQUESTS = ["Tell me a fortune.", "Say something wise.", "Give me a quote.", "Cheer me up.", "What do you think?"]
SYSTEMS = ["You are a fortune cookie.", "Answer briefly.", "You are a helpful assistant."]
MAX_LEN = CONFIG["context_length"]


def load_onnx_weights(model):
    """The shipped weights: named initializers by name, the Linear weights (exported
    transposed, unnamed) in the order the graph creates them, checked by shape."""
    graph = onnx.load(os.path.join(OUT_DIR, "1", "model.onnx")).graph
    named = {i.name: numpy_helper.to_array(i) for i in graph.initializer}
    state = model.state_dict()
    for name in list(state):
        if f"lm.{name}" in named:
            state[name] = torch.from_numpy(named[f"lm.{name}"].copy())
    matmuls = [numpy_helper.to_array(i) for i in graph.initializer if i.name.startswith("onnx::MatMul")]
    linear = [f"blocks.{b}.{p}.weight" for b in range(CONFIG["n_layer"]) for p in ("qkv", "proj", "mlp.0", "mlp.2")]
    for name, w in zip(linear, matmuls):
        assert tuple(w.T.shape) == tuple(state[name].shape), (name, w.shape)
        state[name] = torch.from_numpy(np.ascontiguousarray(w.T))
    model.load_state_dict(state)


def chat_examples():
    """(prompt bytes, answer bytes) pairs, the prompt rendered as the template renders it."""
    pairs = []
    for path in sorted(glob.glob("/usr/share/games/fortunes/*")):
        if "." in os.path.basename(path) or os.path.islink(path) or os.path.isdir(path):
            continue
        with open(path, "rb") as f:
            docs = f.read().decode("utf-8", "replace").split("\n%\n")
        for doc in docs:
            doc = doc.strip("\n%")
            m = re.match(r"^Q:\s*(.+?)\s*\nA:\s*(.+)$", doc, re.S)
            if m:
                q, a = " ".join(m.group(1).split()), " ".join(m.group(2).split())
                pairs.append((q, a, None))
            elif 20 <= len(doc) <= 160:
                pairs.append((None, doc, None))
    rng = random.Random(0)
    examples = []
    for q, a, _ in pairs:
        system = rng.choice(SYSTEMS) if rng.random() < 0.2 else None
        prompt = (f"System: {system}\n" if system else "") + f"Q: {q or rng.choice(REQUESTS)}\nA:"
        answer = " " + a
        ids = list(prompt.encode()) + list(answer.encode()) + [EOS]
        if len(ids) <= MAX_LEN:
            examples.append((len(prompt.encode()), ids))
    rng.shuffle(examples)
    n_val = max(50, len(examples) // 20)
    return examples[n_val:], examples[:n_val]


def chat_batch(examples, size, rng):
    """A random batch of examples (see chat_batch_fixed)."""
    return chat_batch_fixed([examples[rng.randrange(len(examples))] for _ in range(size)])


def chat_loss(model, x, y):
    b, s = x.shape
    logits, _ = model(x, torch.ones(b, s, dtype=torch.long), torch.arange(s).expand(b, s), model.empty_past(b))
    return F.cross_entropy(logits.reshape(-1, VOCAB), y.reshape(-1), ignore_index=-100)


@torch.no_grad()
def chat_val_loss(model, val):
    model.eval()
    total, n = 0.0, 0
    for i in range(0, len(val), 32):
        x, y = chat_batch_fixed(val[i : i + 32])
        total += float(chat_loss(model, x, y)) * int((y != -100).sum())
        n += int((y != -100).sum())
    model.train()
    return total / n


def chat_batch_fixed(examples):
    """Right-padded examples; the loss covers the answer and its end-of-text only."""
    width = max(len(ids) for _, ids in examples) - 1
    x = torch.zeros(len(examples), width, dtype=torch.long)
    y = torch.full((len(examples), width), -100, dtype=torch.long)
    for r, (prompt_len, ids) in enumerate(examples):
        t = torch.tensor(ids)
        x[r, : len(ids) - 1] = t[:-1]
        y[r, prompt_len - 1 : len(ids) - 1] = t[prompt_len:]
    return x, y


@torch.no_grad()
def stop_rate(model, val, n=60, max_new=120, temperature=0.7):
    """Share of sampled answers that end with end-of-text before max_new tokens (KV-cached)."""
    model.eval()
    gen = torch.Generator().manual_seed(7)
    stopped = 0
    for prompt_len, ids in val[:n]:
        prompt = ids[:prompt_len]
        x = torch.tensor([prompt])
        mask = torch.ones(1, len(prompt), dtype=torch.long)
        logits, past = model(x, mask, torch.arange(len(prompt)).unsqueeze(0), model.empty_past(1))
        for _ in range(max_new):
            pos = mask.shape[1]
            if pos >= MAX_LEN:
                break
            probs = (logits[0, -1] / temperature).softmax(-1)
            tok = int(torch.multinomial(probs, 1, generator=gen))
            if tok == EOS:
                stopped += 1
                break
            mask = torch.ones(1, pos + 1, dtype=torch.long)
            logits, past = model(torch.tensor([[tok]]), mask, torch.tensor([[pos]]), past)
    model.train()
    return stopped / n


def main():
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    minutes = float(os.environ.get("CHAT_MINUTES", "10"))
    model = TinyLM(**CONFIG)
    load_onnx_weights(model)
    train_data, val_data = load_corpus()
    chat_train, chat_val = chat_examples()
    print(f"chat examples: {len(chat_train)} train, {len(chat_val)} validation", flush=True)
    print(f"before: chat val {chat_val_loss(model, chat_val):.4f} nats/byte, stop rate {stop_rate(model, chat_val):.2f}", flush=True)
    opt = torch.optim.AdamW(model.parameters(), lr=5e-4, weight_decay=0.05, betas=(0.9, 0.98))
    rng, gen = random.Random(1), torch.Generator().manual_seed(1)
    start, step = time.time(), 0
    while (elapsed := time.time() - start) < minutes * 60:
        lr = 5e-4 * (0.2 + 0.8 * (1 - elapsed / (minutes * 60)))
        for g in opt.param_groups:
            g["lr"] = lr
        loss = chat_loss(model, *chat_batch(chat_train, 24, rng))
        # the original corpus alongside, so that fortunes are not forgotten
        loss = loss + 0.5 * loss_on(model, *batches(train_data, 8, 128, gen))
        opt.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        step += 1
        if step % 200 == 0:
            print(f"step {step} {elapsed / 60:.1f} min loss {float(loss):.3f}", flush=True)
    chat_val = chat_val  # held out throughout
    chat_loss_after = chat_val_loss(model, chat_val)
    rate = stop_rate(model, chat_val)
    from build_tiny_lm import evaluate
    val_loss = evaluate(model, val_data, CONFIG["context_length"], n_batches=50)
    print(f"after {step} steps: chat val {chat_loss_after:.4f} nats/byte, stop rate {rate:.2f}, fortune val {val_loss:.4f}", flush=True)
    json_path = os.path.join(OUT_DIR, "model.json")
    with open(json_path) as f:
        before = json.load(f)
    base = before["versions"]["1"]
    export(model, val_loss, base.get("train_steps", 0), base.get("train_minutes", 0))
    with open(json_path) as f:
        config = json.load(f)
    config["chat_template"] = CHAT_TEMPLATE
    config["versions"]["1"].update(
        {
            "chat_val_loss_nats_per_byte": round(chat_loss_after, 4),
            "chat_stop_rate": round(rate, 2),
            "chat_finetune_steps": step,
            "chat_finetune_minutes": minutes,
        }
    )
    for key in ("max_batch_size", "scheduler", "max_queue_size", "default_timeout_ms"):
        if key in before:
            config[key] = before[key]
    with open(json_path, "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


if __name__ == "__main__":
    main()
