#!/usr/bin/python3
"""Writes the model tests' ONNX models: DIR/NAME.onnx for each NAME.

    generate_models.py --out DIR [--only NAME ...] [--size test|bench]

resnet18 and mobilenet_v2 are torchvision's architectures; bert, gpt and llama are small
hand-written modules with the structure of their namesakes (token and position embeddings,
multi-head attention with masks, layer norm or RMSNorm, GELU or a SiLU-gated MLP, rotary
embeddings and a KV cache for llama). Weights are random with fixed seeds, so a run is
reproducible; nothing here is trained. Every model is exported the way torch.onnx.export
naturally exports it (opset 17), with named symbolic dims: batch, height, width, seq, past.

--size test keeps the transformers tiny so the model tests stay fast; --size bench picks
sizes closer to deployed models for benchmarks. The image models are the same at both sizes.
"""
import argparse
import math
import os
import sys

import torch
import torch.nn.functional as F
import torchvision
from torch import nn

OPSET = 17
NAMES = ["resnet18", "mobilenet_v2", "bert", "gpt", "llama"]

# Transformer hyperparameters per --size.
SIZES = {
    "test": dict(vocab=97, hidden=32, heads=4, layers=2, ffn=64, max_pos=64),
    "bench": dict(vocab=8192, hidden=512, heads=8, layers=4, ffn=2048, max_pos=1024),
}


class SelfAttention(nn.Module):
    """Multi-head attention over [batch, seq, hidden]; `bias` is added to the scores."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.qkv = nn.Linear(hidden, 3 * hidden)
        self.out = nn.Linear(hidden, hidden)

    def split_heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, bias):
        q, k, v = self.qkv(x).split(x.shape[-1], dim=-1)
        q, k, v = self.split_heads(q), self.split_heads(k), self.split_heads(v)
        scores = q @ k.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
        context = scores.softmax(dim=-1) @ v
        b, _, s, _ = context.shape
        return self.out(context.transpose(1, 2).reshape(b, s, -1))


class Bert(nn.Module):
    """A post-norm BERT encoder: word + position + token-type embeddings, padding mask."""

    def __init__(self, vocab, hidden, heads, layers, ffn, max_pos):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.token_type = nn.Embedding(2, hidden)
        self.embed_norm = nn.LayerNorm(hidden)
        self.attn = nn.ModuleList(SelfAttention(hidden, heads) for _ in range(layers))
        self.attn_norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(hidden, ffn) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(ffn, hidden) for _ in range(layers))
        self.ffn_norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.pooler = nn.Linear(hidden, hidden)

    def forward(self, input_ids, attention_mask, token_type_ids):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, dtype=torch.long, device=input_ids.device)
        x = self.word(input_ids) + self.position(positions) + self.token_type(token_type_ids)
        x = self.embed_norm(x)
        # [batch, 1, 1, seq]: 0 where attended, a large negative number at padding.
        bias = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
        for attn, attn_norm, up, down, ffn_norm in zip(
            self.attn, self.attn_norm, self.up, self.down, self.ffn_norm
        ):
            x = attn_norm(x + attn(x, bias))
            x = ffn_norm(x + down(F.gelu(up(x))))
        return x, torch.tanh(self.pooler(x[:, 0]))


class Gpt(nn.Module):
    """A pre-norm GPT-2 decoder: causal mask sliced from a lower-triangular buffer."""

    def __init__(self, vocab, hidden, heads, layers, ffn, max_pos):
        super().__init__()
        self.word = nn.Embedding(vocab, hidden)
        self.position = nn.Embedding(max_pos, hidden)
        self.register_buffer("causal", torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool)))
        self.attn_norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.attn = nn.ModuleList(SelfAttention(hidden, heads) for _ in range(layers))
        self.ffn_norm = nn.ModuleList(nn.LayerNorm(hidden) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(hidden, ffn) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(ffn, hidden) for _ in range(layers))
        self.final_norm = nn.LayerNorm(hidden)

    def forward(self, input_ids):
        seq = input_ids.shape[1]
        positions = torch.arange(seq, dtype=torch.long, device=input_ids.device)
        x = self.word(input_ids) + self.position(positions)
        mask = self.causal[:seq, :seq]
        # Tensor operands, as GPT-2 does (mask_value = torch.full([], min, dtype)): with Python
        # scalars torch 1.13 exports a double Where and a MatMul of mixed dtypes.
        zero = torch.zeros((), dtype=x.dtype)
        bias = torch.where(mask, zero, torch.full((), torch.finfo(x.dtype).min, dtype=x.dtype))
        for attn_norm, attn, ffn_norm, up, down in zip(
            self.attn_norm, self.attn, self.ffn_norm, self.up, self.down
        ):
            x = x + attn(attn_norm(x), bias)
            x = x + down(F.gelu(up(ffn_norm(x)), approximate="tanh"))
        # Tied input and output embeddings, as in GPT-2.
        return self.final_norm(x) @ self.word.weight.t()


class RMSNorm(nn.Module):
    def __init__(self, hidden, eps=1e-6):
        super().__init__()
        self.weight = nn.Parameter(torch.ones(hidden) + 0.1 * torch.randn(hidden))
        self.eps = eps

    def forward(self, x):
        return self.weight * x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


class LlamaAttention(nn.Module):
    """Attention with rotary embeddings and a KV cache: new keys/values append to the past."""

    def __init__(self, hidden, heads):
        super().__init__()
        self.heads = heads
        self.head_dim = hidden // heads
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, hidden, bias=False)
        self.v = nn.Linear(hidden, hidden, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)

    def split_heads(self, x):
        b, s, _ = x.shape
        return x.view(b, s, self.heads, self.head_dim).transpose(1, 2)

    def forward(self, x, cos, sin, bias, past_key, past_value):
        q, k, v = self.split_heads(self.q(x)), self.split_heads(self.k(x)), self.split_heads(self.v(x))
        q = q * cos + rotate_half(q) * sin
        k = k * cos + rotate_half(k) * sin
        key = torch.cat((past_key, k), dim=2)
        value = torch.cat((past_value, v), dim=2)
        scores = q @ key.transpose(-1, -2) / math.sqrt(self.head_dim) + bias
        context = scores.softmax(dim=-1) @ value
        b, _, s, _ = context.shape
        return self.o(context.transpose(1, 2).reshape(b, s, -1)), key, value


class Llama(nn.Module):
    """A Llama decoder step: RMSNorm, rotary positions past..past+seq, SiLU-gated MLP, cache."""

    def __init__(self, vocab, hidden, heads, layers, ffn, max_pos):
        super().__init__()
        self.layers = layers
        self.embed = nn.Embedding(vocab, hidden)
        head_dim = hidden // heads
        inv_freq = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(max_pos).float(), inv_freq)
        angles = torch.cat((angles, angles), dim=-1)
        self.register_buffer("cos_cached", angles.cos())
        self.register_buffer("sin_cached", angles.sin())
        self.attn_norm = nn.ModuleList(RMSNorm(hidden) for _ in range(layers))
        self.attn = nn.ModuleList(LlamaAttention(hidden, heads) for _ in range(layers))
        self.ffn_norm = nn.ModuleList(RMSNorm(hidden) for _ in range(layers))
        self.gate = nn.ModuleList(nn.Linear(hidden, ffn, bias=False) for _ in range(layers))
        self.up = nn.ModuleList(nn.Linear(hidden, ffn, bias=False) for _ in range(layers))
        self.down = nn.ModuleList(nn.Linear(ffn, hidden, bias=False) for _ in range(layers))
        self.final_norm = RMSNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)

    def causal_bias(self, seq, past, dtype):
        # Query i (at position past+i) sees every cached key and the new keys 0..i.
        query = torch.arange(seq)[:, None] + past
        key = torch.arange(past + seq)[None, :]
        return torch.zeros(()).masked_fill(key > query, torch.finfo(dtype).min)

    def forward(self, input_ids, *past):
        seq = input_ids.shape[1]
        past_len = past[0].shape[2]
        x = self.embed(input_ids)
        positions = torch.arange(past_len, past_len + seq)
        cos = self.cos_cached[positions][None, None]
        sin = self.sin_cached[positions][None, None]
        bias = self.causal_bias(seq, past_len, x.dtype)
        presents = []
        for i in range(self.layers):
            h, key, value = self.attn[i](
                self.attn_norm[i](x), cos, sin, bias, past[2 * i], past[2 * i + 1]
            )
            x = x + h
            y = self.ffn_norm[i](x)
            x = x + self.down[i](F.silu(self.gate[i](y)) * self.up[i](y))
            presents += [key, value]
        return (self.lm_head(self.final_norm(x)), *presents)


def export(module, args, path, input_names, output_names, dynamic_axes):
    module.eval()
    with torch.no_grad():
        torch.onnx.export(
            module,
            args,
            path,
            input_names=input_names,
            output_names=output_names,
            dynamic_axes=dynamic_axes,
            opset_version=OPSET,
            do_constant_folding=True,
        )


def randomize_batch_norms(module):
    """Fresh batch norms are nearly the identity in eval mode, which would hide a wrong mean or
    variance; random statistics make every one of them count (and keep activations O(1))."""
    for m in module.modules():
        if isinstance(m, nn.BatchNorm2d):
            n = m.num_features
            m.weight.data = torch.empty(n).uniform_(0.5, 1.5)
            m.bias.data = torch.randn(n) * 0.1
            m.running_mean = torch.randn(n) * 0.1
            m.running_var = torch.empty(n).uniform_(0.5, 1.5)


def export_image_model(name, path):
    module = getattr(torchvision.models, name)(weights=None)
    randomize_batch_norms(module)
    image = {0: "batch", 2: "height", 3: "width"}
    export(
        module,
        (torch.randn(1, 3, 64, 64),),
        path,
        ["image"],
        ["logits"],
        {"image": image, "logits": {0: "batch"}},
    )


def export_bert(path, size):
    module = Bert(**size)
    ids = torch.randint(0, size["vocab"], (2, 7))
    mask = torch.ones(2, 7, dtype=torch.long)
    types = torch.zeros(2, 7, dtype=torch.long)
    bs = {0: "batch", 1: "seq"}
    export(
        module,
        (ids, mask, types),
        path,
        ["input_ids", "attention_mask", "token_type_ids"],
        ["last_hidden_state", "pooled"],
        {
            "input_ids": bs,
            "attention_mask": bs,
            "token_type_ids": bs,
            "last_hidden_state": bs,
            "pooled": {0: "batch"},
        },
    )


def export_gpt(path, size):
    module = Gpt(**size)
    ids = torch.randint(0, size["vocab"], (2, 7))
    bs = {0: "batch", 1: "seq"}
    export(module, (ids,), path, ["input_ids"], ["logits"], {"input_ids": bs, "logits": bs})


def export_llama(path, size):
    module = Llama(**size)
    batch, seq, past = 2, 3, 4
    head_dim = size["hidden"] // size["heads"]
    ids = torch.randint(0, size["vocab"], (batch, seq))
    inputs, outputs, past_tensors = ["input_ids"], ["logits"], []
    axes = {"input_ids": {0: "batch", 1: "seq"}, "logits": {0: "batch", 1: "seq"}}
    for i in range(size["layers"]):
        for kind in ("key", "value"):
            inputs.append(f"past_{kind}_{i}")
            outputs.append(f"present_{kind}_{i}")
            # present's length is not declared: the importer derives `past + seq` from the graph.
            axes[inputs[-1]] = {0: "batch", 2: "past"}
            past_tensors.append(torch.randn(batch, size["heads"], past, head_dim))
    export(module, (ids, *past_tensors), path, inputs, outputs, axes)


def generate(name, out_dir, size):
    torch.manual_seed(1234 + NAMES.index(name))
    path = os.path.join(out_dir, f"{name}.onnx")
    if name in ("resnet18", "mobilenet_v2"):
        export_image_model(name, path)
    elif name == "bert":
        export_bert(path, SIZES[size])
    elif name == "gpt":
        export_gpt(path, SIZES[size])
    else:
        export_llama(path, SIZES[size])
    return path


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", required=True, help="directory for NAME.onnx")
    parser.add_argument("--only", nargs="+", choices=NAMES, default=NAMES, metavar="NAME")
    parser.add_argument("--size", choices=sorted(SIZES), default="test")
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    for name in args.only:
        print(f"generate_models: {generate(name, args.out, args.size)}", file=sys.stderr)


if __name__ == "__main__":
    main()
