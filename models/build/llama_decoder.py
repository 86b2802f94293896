"""A decoder in the Llama / Qwen3 layout, written as transformers' modeling_qwen3.py has it.

RMSNorm before attention and MLP, rotary position embeddings (rotate-half) computed from
`position_ids`, grouped-query attention (each KV head serves n_head / n_kv_head query heads,
transformers' `repeat_kv`), Qwen3's per-head RMSNorm of queries and keys, a SwiGLU MLP, tied
embeddings. `forward` takes and returns the KV cache as Optimum's decoder export does:

    inputs : input_ids [b, s], attention_mask [b, past + s], position_ids [b, s],
             past (key, value) per layer, each [b, n_kv_head, past, head_dim]
    outputs: logits [b, s, vocab], present (key, value) per layer, [b, n_kv_head, past + s, head_dim]

Keys are cached after their rotation, as transformers caches them.
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class RMSNorm(nn.Module):
    def __init__(self, dim, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(dim))
        self.eps = eps

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class Rotary(nn.Module):
    """cos and sin per position and channel: [b, 1, s, head_dim], to broadcast over heads."""

    def __init__(self, head_dim, theta):
        super().__init__()
        inv_freq = 1.0 / theta ** (torch.arange(0, head_dim, 2).float() / head_dim)
        self.register_buffer("inv_freq", inv_freq, persistent=False)

    def forward(self, position_ids):
        freqs = position_ids.unsqueeze(-1).float() * self.inv_freq
        emb = torch.cat((freqs, freqs), dim=-1).unsqueeze(1)
        return emb.cos(), emb.sin()


class Attention(nn.Module):
    def __init__(self, hidden, n_head, n_kv_head, head_dim):
        super().__init__()
        assert n_head % n_kv_head == 0
        self.n_head, self.n_kv_head, self.head_dim = n_head, n_kv_head, head_dim
        self.q_proj = nn.Linear(hidden, n_head * head_dim, bias=False)
        self.k_proj = nn.Linear(hidden, n_kv_head * head_dim, bias=False)
        self.v_proj = nn.Linear(hidden, n_kv_head * head_dim, bias=False)
        self.o_proj = nn.Linear(n_head * head_dim, hidden, bias=False)
        self.q_norm = RMSNorm(head_dim)
        self.k_norm = RMSNorm(head_dim)

    def forward(self, x, cos, sin, visible, past_k, past_v):
        b, s, _ = x.shape
        hd = self.head_dim
        q = self.q_norm(self.q_proj(x).view(b, s, self.n_head, hd)).transpose(1, 2)
        k = self.k_norm(self.k_proj(x).view(b, s, self.n_kv_head, hd)).transpose(1, 2)
        v = self.v_proj(x).view(b, s, self.n_kv_head, hd).transpose(1, 2)
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        rep = self.n_head // self.n_kv_head
        scores = (q @ repeat_kv(k, rep).transpose(-1, -2)) * hd**-0.5
        # transformers' eager masking: the dtype's minimum, not -inf, so that a query that sees
        # nothing (a left pad) averages instead of turning NaN
        scores = torch.where(visible, scores, torch.tensor(torch.finfo(torch.float32).min))
        y = scores.softmax(dim=-1) @ repeat_kv(v, rep)
        return self.o_proj(y.transpose(1, 2).reshape(b, s, self.n_head * hd)), k, v


def repeat_kv(x, rep):
    """[b, kv, t, d] -> [b, kv * rep, t, d]: KV head j serves query heads j * rep ... j * rep + rep - 1."""
    if rep == 1:
        return x
    b, kv, t, d = x.shape
    return x[:, :, None, :, :].expand(b, kv, rep, t, d).reshape(b, kv * rep, t, d)


class MLP(nn.Module):
    def __init__(self, hidden, intermediate):
        super().__init__()
        self.gate_proj = nn.Linear(hidden, intermediate, bias=False)
        self.up_proj = nn.Linear(hidden, intermediate, bias=False)
        self.down_proj = nn.Linear(intermediate, hidden, bias=False)

    def forward(self, x):
        return self.down_proj(F.silu(self.gate_proj(x)) * self.up_proj(x))


class Layer(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.input_layernorm = RMSNorm(cfg["hidden"])
        self.self_attn = Attention(cfg["hidden"], cfg["n_head"], cfg["n_kv_head"], cfg["head_dim"])
        self.post_attention_layernorm = RMSNorm(cfg["hidden"])
        self.mlp = MLP(cfg["hidden"], cfg["intermediate"])

    def forward(self, x, cos, sin, visible, past_k, past_v):
        a, k, v = self.self_attn(self.input_layernorm(x), cos, sin, visible, past_k, past_v)
        x = x + a
        return x + self.mlp(self.post_attention_layernorm(x)), k, v


class Decoder(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = cfg
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], cfg["hidden"])
        self.layers = nn.ModuleList(Layer(cfg) for _ in range(cfg["n_layer"]))
        self.norm = RMSNorm(cfg["hidden"])
        self.rotary = Rotary(cfg["head_dim"], cfg["rope_theta"])

    def forward(self, input_ids, attention_mask, position_ids, past):
        s = input_ids.shape[1]
        total = attention_mask.shape[1]
        # query i sits at slot total - s + i and sees every unmasked slot up to it
        key_idx = torch.arange(total).unsqueeze(0)
        query_idx = torch.arange(s).unsqueeze(1) + (total - s)
        visible = (key_idx <= query_idx).unsqueeze(0).unsqueeze(0) & (
            attention_mask.unsqueeze(1).unsqueeze(2) > 0
        )
        cos, sin = self.rotary(position_ids)
        x = self.embed_tokens(input_ids)
        present = []
        for layer, (pk, pv) in zip(self.layers, past):
            x, k, v = layer(x, cos, sin, visible, pk, pv)
            present.append((k, v))
        # tied embeddings: the output head is the input table
        return F.linear(self.norm(x), self.embed_tokens.weight), present

    def empty_past(self, batch):
        shape = (batch, self.cfg["n_kv_head"], 0, self.cfg["head_dim"])
        return [(torch.zeros(shape), torch.zeros(shape)) for _ in self.layers]


class Exported(nn.Module):
    """Flat arguments, so that torch.onnx.export sees Optimum's input and output lists."""

    def __init__(self, decoder):
        super().__init__()
        self.decoder = decoder

    def forward(self, input_ids, attention_mask, position_ids, *flat_past):
        past = [(flat_past[2 * i], flat_past[2 * i + 1]) for i in range(len(flat_past) // 2)]
        logits, present = self.decoder(input_ids, attention_mask, position_ids, past)
        return (logits, *[t for kv in present for t in kv])
