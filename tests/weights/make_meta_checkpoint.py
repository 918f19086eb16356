#!/usr/bin/python3
"""Writes the test checkpoints of tests/weights/test_meta_checkpoint.cpp into OUT_DIR.

Small random Llamas in Meta's original layout, saved by torch.save (Debian's python3-torch) as Meta's download
holds them (params.json, consolidated.NN.pth), and the SAME weights as Hugging Face folders (config.json and a
model.safetensors written here by hand: a little-endian u64 header length, the JSON header, the raw bytes), with
Hugging Face's converter's permutation of the q/k rows applied independently of kascade:

  meta-a-1, meta-a-2, hf-a   Llama 2 style, F32, GQA 4/2, vocab_size -1 in params.json; one shard (wq/wk/wv views
                             of one storage), and two model-parallel shards with the embedding split by columns
                             (Llama 2's ParallelEmbedding)
  meta-b-2, hf-b             Llama 3.1 style, BF16, GQA 8/2, ffn_dim_multiplier, rope_theta 500000,
                             use_scaled_rope; two shards with the embedding split by rows (VocabParallelEmbedding)
  meta-c-1, hf-c             F16, no output.weight (the embedding is the LM head), one shard
  meta-noncontig             meta-a-1 with one weight saved as a transposed (non-contiguous) view
  meta-nan                   meta-a-1 with a NaN in layers.1.feed_forward.w2.weight at [3, 5]
  meta-evil                  params.json of model a and a consolidated.00.pth whose data.pkl calls os.system
"""
import json
import os
import struct
import sys
import zipfile
from collections import OrderedDict

import torch

MODELS = {
    "a": dict(params={"dim": 64, "n_layers": 2, "n_heads": 4, "n_kv_heads": 2, "vocab_size": -1, "multiple_of": 32,
                      "norm_eps": 1e-05},
              vocab=96, dtype=torch.float32, rope_theta=10000.0, scaled_rope=False, tied=False, context=4096),
    "b": dict(params={"dim": 64, "n_layers": 2, "n_heads": 8, "n_kv_heads": 2, "vocab_size": 128, "multiple_of": 16,
                      "ffn_dim_multiplier": 1.3, "norm_eps": 1e-05, "rope_theta": 500000.0, "use_scaled_rope": True},
              vocab=128, dtype=torch.bfloat16, rope_theta=500000.0, scaled_rope=True, tied=False, context=131072),
    "c": dict(params={"dim": 32, "n_layers": 1, "n_heads": 4, "n_kv_heads": 4, "vocab_size": 80, "multiple_of": 16,
                      "norm_eps": 1e-06},
              vocab=80, dtype=torch.float16, rope_theta=10000.0, scaled_rope=False, tied=True, context=4096),
}


def ffn_width(p):
    """The FFN width as Meta's model.py derives it."""
    hidden = int(2 * (4 * p["dim"]) / 3)
    if p.get("ffn_dim_multiplier") is not None:
        hidden = int(p["ffn_dim_multiplier"] * hidden)
    m = p["multiple_of"]
    return m * ((hidden + m - 1) // m)


def random_weights(spec, seed):
    """A state dict in Meta's names; matrices scaled so that attention and logits are far from uniform."""
    g = torch.Generator().manual_seed(seed)
    p = spec["params"]
    dim, heads, kv_heads = p["dim"], p["n_heads"], p["n_kv_heads"]
    head_dim = dim // heads
    hidden = ffn_width(p)

    def mat(rows, cols):
        return (torch.randn(rows, cols, generator=g) / cols ** 0.5 * 1.5).to(spec["dtype"])

    def norm(n):
        return (1.0 + 0.2 * torch.randn(n, generator=g)).to(spec["dtype"])

    sd = OrderedDict()
    sd["tok_embeddings.weight"] = torch.randn(spec["vocab"], dim, generator=g).to(spec["dtype"])
    for i in range(p["n_layers"]):
        pre = f"layers.{i}."
        sd[pre + "attention.wq.weight"] = mat(heads * head_dim, dim)
        sd[pre + "attention.wk.weight"] = mat(kv_heads * head_dim, dim)
        sd[pre + "attention.wv.weight"] = mat(kv_heads * head_dim, dim)
        sd[pre + "attention.wo.weight"] = mat(dim, heads * head_dim)
        sd[pre + "feed_forward.w1.weight"] = mat(hidden, dim)
        sd[pre + "feed_forward.w2.weight"] = mat(dim, hidden)
        sd[pre + "feed_forward.w3.weight"] = mat(hidden, dim)
        sd[pre + "attention_norm.weight"] = norm(dim)
        sd[pre + "ffn_norm.weight"] = norm(dim)
    sd["norm.weight"] = norm(dim)
    if not spec["tied"]:
        sd["output.weight"] = mat(spec["vocab"], dim)
    return sd


# Meta's model-parallel split of each weight (fairscale): dimension 0 for ColumnParallelLinear, 1 for
# RowParallelLinear, None for the norms every shard holds whole.
def split_dim(name, embedding_dim):
    if name == "tok_embeddings.weight":
        return embedding_dim
    if name.endswith(("wq.weight", "wk.weight", "wv.weight", "w1.weight", "w3.weight")) or name == "output.weight":
        return 0
    if name.endswith(("wo.weight", "w2.weight")):
        return 1
    return None


def save_meta(folder, spec, sd, shards=1, embedding_dim=0):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "params.json"), "w") as f:
        json.dump(spec["params"], f)
    for s in range(shards):
        part = OrderedDict()
        for name, t in sd.items():
            d = split_dim(name, embedding_dim)
            # A clone: each shard owns its storages, as a model-parallel rank's state dict does.
            part[name] = (t if d is None or shards == 1 else t.chunk(shards, dim=d)[s]).clone(
                memory_format=torch.contiguous_format)
        torch.save(part, os.path.join(folder, f"consolidated.{s:02d}.pth"))


def permute(w, n_heads):
    """Hugging Face's convert_llama_weights_to_hf.py: Meta's interleaved RoPE pairs to rotate-half rows."""
    dim1, dim2 = w.shape
    return w.view(n_heads, dim1 // n_heads // 2, 2, dim2).transpose(1, 2).reshape(dim1, dim2)


SAFETENSORS_DTYPE = {torch.float32: "F32", torch.float16: "F16", torch.bfloat16: "BF16"}


def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        t = t.contiguous()
        raw = t.view(torch.int16).numpy().tobytes() if t.dtype == torch.bfloat16 else t.numpy().tobytes()
        header[name] = {"dtype": SAFETENSORS_DTYPE[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def save_hf(folder, spec, sd):
    os.makedirs(folder, exist_ok=True)
    p = spec["params"]
    heads, kv_heads = p["n_heads"], p["n_kv_heads"]
    out = OrderedDict()
    out["model.embed_tokens.weight"] = sd["tok_embeddings.weight"]
    for i in range(p["n_layers"]):
        m, h = f"layers.{i}.", f"model.layers.{i}."
        out[h + "self_attn.q_proj.weight"] = permute(sd[m + "attention.wq.weight"], heads)
        out[h + "self_attn.k_proj.weight"] = permute(sd[m + "attention.wk.weight"], kv_heads)
        out[h + "self_attn.v_proj.weight"] = sd[m + "attention.wv.weight"]
        out[h + "self_attn.o_proj.weight"] = sd[m + "attention.wo.weight"]
        out[h + "mlp.gate_proj.weight"] = sd[m + "feed_forward.w1.weight"]
        out[h + "mlp.down_proj.weight"] = sd[m + "feed_forward.w2.weight"]
        out[h + "mlp.up_proj.weight"] = sd[m + "feed_forward.w3.weight"]
        out[h + "input_layernorm.weight"] = sd[m + "attention_norm.weight"]
        out[h + "post_attention_layernorm.weight"] = sd[m + "ffn_norm.weight"]
    out["model.norm.weight"] = sd["norm.weight"]
    if not spec["tied"]:
        out["lm_head.weight"] = sd["output.weight"]
    write_safetensors(os.path.join(folder, "model.safetensors"), out)
    config = {"model_type": "llama", "hidden_size": p["dim"], "intermediate_size": ffn_width(p),
              "num_hidden_layers": p["n_layers"], "num_attention_heads": heads, "num_key_value_heads": kv_heads,
              "vocab_size": spec["vocab"], "max_position_embeddings": spec["context"], "rms_norm_eps": p["norm_eps"],
              "rope_theta": spec["rope_theta"], "tie_word_embeddings": spec["tied"], "hidden_act": "silu",
              "bos_token_id": 1, "eos_token_id": 2}
    if spec["scaled_rope"]:
        config["rope_scaling"] = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                  "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
    with open(os.path.join(folder, "config.json"), "w") as f:
        json.dump(config, f)


def save_shared_storage(folder, spec, sd):
    """Model a in one shard, with wq, wk and wv of each layer saved as row views of one fused storage."""
    views = OrderedDict(sd)
    for i in range(spec["params"]["n_layers"]):
        names = [f"layers.{i}.attention.{w}.weight" for w in ("wq", "wk", "wv")]
        fused = torch.cat([sd[n] for n in names])
        start = 0
        for n in names:
            views[n] = fused[start:start + sd[n].shape[0]]
            start += sd[n].shape[0]
    save_meta(folder, spec, views)


def save_non_contiguous(folder, spec, sd):
    bad = OrderedDict(sd)
    bad["layers.0.attention.wo.weight"] = sd["layers.0.attention.wo.weight"].t().contiguous().t()
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "params.json"), "w") as f:
        json.dump(spec["params"], f)
    torch.save(bad, os.path.join(folder, "consolidated.00.pth"))


# A pickle that would run os.system("true") if unpickled by Python, in an archive laid out as torch.save lays
# its out (stored entries); kascade must refuse it at the GLOBAL opcode, byte 2.
EVIL_PICKLE = b"\x80\x02cos\nsystem\nq\x00X\x04\x00\x00\x00trueq\x01\x85q\x02Rq\x03."


def save_evil(folder, spec):
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "params.json"), "w") as f:
        json.dump(spec["params"], f)
    with zipfile.ZipFile(os.path.join(folder, "consolidated.00.pth"), "w", zipfile.ZIP_STORED) as z:
        z.writestr("consolidated.00/data.pkl", EVIL_PICKLE)
        z.writestr("consolidated.00/version", "3\n")


def main():
    out = sys.argv[1]
    a, b, c = MODELS["a"], MODELS["b"], MODELS["c"]
    sd_a, sd_b, sd_c = random_weights(a, 1), random_weights(b, 2), random_weights(c, 3)
    save_shared_storage(os.path.join(out, "meta-a-1"), a, sd_a)
    save_meta(os.path.join(out, "meta-a-2"), a, sd_a, shards=2, embedding_dim=1)
    save_hf(os.path.join(out, "hf-a"), a, sd_a)
    save_meta(os.path.join(out, "meta-b-2"), b, sd_b, shards=2, embedding_dim=0)
    save_hf(os.path.join(out, "hf-b"), b, sd_b)
    save_meta(os.path.join(out, "meta-c-1"), c, sd_c)
    save_hf(os.path.join(out, "hf-c"), c, sd_c)
    save_non_contiguous(os.path.join(out, "meta-noncontig"), a, sd_a)
    save_evil(os.path.join(out, "meta-evil"), a)
    nan = OrderedDict(sd_a)
    nan["layers.1.feed_forward.w2.weight"] = sd_a["layers.1.feed_forward.w2.weight"].clone()
    nan["layers.1.feed_forward.w2.weight"][3, 5] = float("nan")
    save_meta(os.path.join(out, "meta-nan"), a, nan)


if __name__ == "__main__":
    main()
