# scripts/gguf_fixtures.py: the Python half of scripts/make_gguf_fixtures.sh (run by Debian's /usr/bin/python3 with
# python3-torch and python3-numpy; llama.cpp's convert_hf_to_gguf.py and gguf-py from an extracted llama.cpp tree).
#
#   convert   MODEL_DIR --outtype T --outfile F [--llama2c-tokenizer tok.bin]
#             llama.cpp's own converter, with a safetensors reader for machines without the safetensors package
#             (../shared/tools/llama-cpp-peer/shim) and the vocabulary read from tokenizer.json (byte-level BPE,
#             pre-tokenizer "smollm") or, for stories260K, which ships only llama2.c's tok512.bin, from that file as
#             the SentencePiece model it was exported from would give it (pieces with "▁", scores, token types).
#   reference GGUF CONFIG_JSON OUT_DIR
#             every tensor of GGUF dequantized by gguf-py (GGUFReader + gguf.quants.dequantize), the q/k row order
#             of the converter undone, written as a Hugging Face folder (config.json + model.safetensors, written
#             here byte by byte): quantized tensors as BF16 (rounded to nearest even from gguf-py's fp32, as kascade
#             stores them), F32/F16/BF16 tensors in their own dtype.
#   bpe-tokenizer TOKENIZER_JSON N OUT_JSON
#             a byte-level BPE tokenizer.json cut to its first N ids (the merges among them kept).
#   dequant-types GGUF REFERENCE
#             one tensor of random blocks of each type kascade dequantizes, written by gguf-py's GGUFWriter, and
#             gguf-py's fp32 dequantization of each as an F32 safetensors file.
#   random-model CONFIG_JSON OUT_DIR [--seed N]
#             a Hugging Face folder with random F32 weights at that shape.
#   tiny llama|gpt2 OUT
#             a tiny llama model with an embedded tokenizer of that kind, written by GGUFWriter (the fuzz seeds).
import argparse
import json
import os
import struct
import sys

import numpy as np


class SilentProgress:
    """Stands in for tqdm (gguf-py draws a progress bar while writing) where python3-tqdm is not installed."""

    def __init__(self, *args, **kwargs):
        pass

    def __getattr__(self, name):
        return lambda *args, **kwargs: None


def llama_cpp_imports(llama_cpp, shim):
    sys.path.insert(0, shim)
    sys.path.insert(0, os.path.join(llama_cpp, "gguf-py"))
    sys.path.insert(0, llama_cpp)
    try:
        import tqdm  # noqa: F401
    except ImportError:
        import types
        sys.modules["tqdm"] = types.SimpleNamespace(tqdm=SilentProgress)


def cmd_convert(args):
    llama_cpp_imports(args.llama_cpp, args.shim)
    import torch
    for name in ("float8_e4m3fn", "float8_e5m2"):
        if not hasattr(torch, name):
            setattr(torch, name, torch.uint8)  # torch 1.13 lacks fp8; never used for these models
    import convert_hf_to_gguf as C
    import gguf

    if args.llama2c_tokenizer:
        with open(args.llama2c_tokenizer, "rb") as f:
            data = f.read()
        # tokenizer.bin: i32 max_token_length, then per token f32 score, i32 length, bytes. llama2.c's export wrote
        # SentencePiece's pieces with "▁" as " " and BOS/EOS as "\n<s>\n" / "\n</s>\n"; ids 0 <unk>, 1 <s>, 2 </s>,
        # 3..258 the byte pieces <0x00>..<0xFF>.
        pieces, scores = [], []
        at = 4
        while at < len(data):
            score, length = struct.unpack_from("<fi", data, at)
            at += 8
            pieces.append(data[at:at + length].decode("utf-8"))
            scores.append(score)
            at += length
        T = gguf.TokenType

        def create_vocab(self):
            tokens, toktypes = [], []
            for i, piece in enumerate(pieces):
                if i == 0:
                    tokens.append(b"<unk>"); toktypes.append(T.UNKNOWN)
                elif i in (1, 2):
                    tokens.append(piece.strip("\n").encode()); toktypes.append(T.CONTROL)
                elif 3 <= i < 259:
                    tokens.append(piece.encode()); toktypes.append(T.BYTE)
                else:
                    tokens.append(piece.replace(" ", "\u2581").encode()); toktypes.append(T.NORMAL)
            return tokens, list(scores), toktypes

        C.Model._create_vocab_sentencepiece = create_vocab
    else:
        def get_vocab_base(self):
            tj = json.load(open(self.dir_model / "tokenizer.json", encoding="utf-8"))
            vocab = dict(tj["model"]["vocab"])
            added = {a["content"]: a for a in tj["added_tokens"]}
            for a in tj["added_tokens"]:
                vocab[a["content"]] = a["id"]
            rev = {i: t for t, i in vocab.items()}
            tokens, toktypes = [], []
            for i in range(self.hparams.get("vocab_size", len(vocab))):
                t = rev[i]
                if t in added:
                    special = added[t]["special"] or self.does_token_look_special(t)
                    toktypes.append(gguf.TokenType.CONTROL if special else gguf.TokenType.USER_DEFINED)
                else:
                    toktypes.append(gguf.TokenType.NORMAL)
                tokens.append(t)
            return tokens, toktypes, "smollm"  # the converter's hash table names SmolLM2's pre-tokenizer so

        C.Model.get_vocab_base = get_vocab_base
    sys.argv = ["convert_hf_to_gguf.py", args.model, "--outtype", args.outtype, "--outfile", args.outfile,
                "--no-lazy"]
    C.main()


def f32_to_bf16_bits(values):
    bits = values.astype(np.float32).view(np.uint32).astype(np.uint64)
    assert np.all(np.isfinite(values))
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)  # round to nearest even


def hf_rows_from_gguf(w, n_head):
    """Undoes LlamaModel.permute: GGUF row h*hd + 2i + half holds HF row h*hd + half*hd/2 + i."""
    rows = w.shape[0]
    hd = rows // n_head
    return w.reshape(n_head, hd // 2, 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


HF_NAMES = {
    "token_embd": "model.embed_tokens", "output_norm": "model.norm", "output": "lm_head",
    "attn_norm": "input_layernorm", "attn_q": "self_attn.q_proj", "attn_k": "self_attn.k_proj",
    "attn_v": "self_attn.v_proj", "attn_output": "self_attn.o_proj", "ffn_norm": "post_attention_layernorm",
    "ffn_gate": "mlp.gate_proj", "ffn_up": "mlp.up_proj", "ffn_down": "mlp.down_proj",
}


def write_safetensors(path, tensors):
    """tensors: name -> (dtype, raw little-endian bytes, shape); the safetensors layout, written by hand."""
    header, offset = {}, 0
    for name in sorted(tensors):
        dtype, data, shape = tensors[name]
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(data)]}
        offset += len(data)
    header_bytes = json.dumps(header, separators=(",", ":")).encode()
    header_bytes += b" " * (-len(header_bytes) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(header_bytes)))
        f.write(header_bytes)
        for name in sorted(tensors):
            f.write(tensors[name][1])


def cmd_reference(args):
    llama_cpp_imports(args.llama_cpp, args.shim)
    from gguf import GGUFReader, GGMLQuantizationType as Q
    from gguf.quants import dequantize

    reader = GGUFReader(args.gguf)
    config = json.load(open(args.config))
    n_head = config["num_attention_heads"]
    n_kv = config.get("num_key_value_heads", n_head)
    tensors = {}
    for t in reader.tensors:
        shape = [int(d) for d in reversed(t.shape.tolist())]  # row-major
        values = dequantize(t.data, t.tensor_type).reshape(shape)
        parts = t.name.split(".")
        if parts[0] == "blk":
            layer, kind = parts[1], parts[2]
            name = f"model.layers.{layer}.{HF_NAMES[kind]}.weight"
            if kind == "attn_q":
                values = hf_rows_from_gguf(values, n_head)
            elif kind == "attn_k":
                values = hf_rows_from_gguf(values, n_kv)
        else:
            name = HF_NAMES[parts[0]] + ".weight"
        if t.tensor_type == Q.F32:
            tensors[name] = ("F32", values.astype("<f4").tobytes(), shape)
        elif t.tensor_type == Q.F16:
            tensors[name] = ("F16", values.astype("<f2").tobytes(), shape)
        else:  # BF16 and every quantized type: BF16, as kascade keeps them
            tensors[name] = ("BF16", f32_to_bf16_bits(values).astype("<u2").tobytes(), shape)
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def cmd_bpe_tokenizer(args):
    tj = json.load(open(args.tokenizer_json, encoding="utf-8"))
    model = tj["model"]
    vocab = {t: i for t, i in model["vocab"].items() if i < args.n}
    merges = []
    for m in model["merges"]:
        left, right = m.split(" ") if isinstance(m, str) else m
        if left in vocab and right in vocab and left + right in vocab:
            merges.append(m)
    model["vocab"] = vocab
    model["merges"] = merges
    tj["added_tokens"] = [a for a in tj["added_tokens"] if a["id"] < args.n]
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(tj, f, ensure_ascii=False, indent=1)


def bf16_bytes_of(values):
    return f32_to_bf16_bits(values.astype(np.float32))


def random_blocks(rng, qtype, rows, cols):
    """Random bytes for rows x cols elements of a quantized type, with every f16 scale a finite value in [-2, 2]."""
    from gguf import GGMLQuantizationType as Q
    from gguf.constants import GGML_QUANT_SIZES
    block_elems, block_bytes = GGML_QUANT_SIZES[qtype]
    n_blocks = rows * cols // block_elems
    blocks = rng.integers(0, 256, size=(n_blocks, block_bytes), dtype=np.uint8)
    scale_at = {Q.Q8_0: [0], Q.Q4_0: [0], Q.Q4_K: [0, 2], Q.Q5_K: [0, 2], Q.Q6_K: [208]}[qtype]
    for at in scale_at:
        scales = rng.uniform(-2, 2, size=n_blocks).astype(np.float16)
        blocks[:, at:at + 2] = scales.view(np.uint8).reshape(n_blocks, 2)
    return blocks.reshape(rows, cols // block_elems * block_bytes)


def cmd_dequant_types(args):
    """One tensor of each type kascade dequantizes (random blocks), and gguf-py's fp32 values of each."""
    llama_cpp_imports(args.llama_cpp, args.shim)
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import dequantize
    rng = np.random.default_rng(24)
    rows, cols = 3, 512
    writer = gguf.GGUFWriter(args.gguf, "llama")
    reference = {}
    for qtype in (Q.F32, Q.F16, Q.BF16, Q.Q8_0, Q.Q4_0, Q.Q4_K, Q.Q5_K, Q.Q6_K):
        name = qtype.name.lower()
        if qtype in (Q.F32, Q.F16):
            data = rng.standard_normal((rows, cols)).astype(np.float32 if qtype == Q.F32 else np.float16)
            writer.add_tensor(name, data)
            raw = data.view(np.uint8).reshape(rows, -1)
        elif qtype == Q.BF16:
            raw = bf16_bytes_of(rng.standard_normal((rows, cols))).view(np.uint8).reshape(rows, -1)
            writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        else:
            raw = random_blocks(rng, qtype, rows, cols)
            writer.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qtype)
        reference[name] = dequantize(raw, qtype).astype(np.float32).reshape(rows, cols)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    write_safetensors(args.reference, {n: ("F32", v.astype("<f4").tobytes(), list(v.shape))
                                       for n, v in reference.items()})


def cmd_random_model(args):
    """A Llama model with random F32 weights at the shape of CONFIG_JSON (copied into OUT_DIR beside them): matrices
    uniform in [-a, a], a = sqrt(3) * initializer_range, norm weights 1 + U[-0.1, 0.1]."""
    config = json.load(open(args.config))
    rng = np.random.default_rng(args.seed)
    dim, hidden = config["hidden_size"], config["intermediate_size"]
    heads = config["num_attention_heads"]
    kv = config.get("num_key_value_heads", heads)
    hd = config.get("head_dim", dim // heads)
    a = np.sqrt(3) * config.get("initializer_range", 0.02)
    shapes = {"model.embed_tokens.weight": (config["vocab_size"], dim), "model.norm.weight": (dim,)}
    if not config.get("tie_word_embeddings", False):
        shapes["lm_head.weight"] = (config["vocab_size"], dim)
    for i in range(config["num_hidden_layers"]):
        p = f"model.layers.{i}."
        shapes.update({p + "input_layernorm.weight": (dim,), p + "post_attention_layernorm.weight": (dim,),
                       p + "self_attn.q_proj.weight": (heads * hd, dim), p + "self_attn.k_proj.weight": (kv * hd, dim),
                       p + "self_attn.v_proj.weight": (kv * hd, dim), p + "self_attn.o_proj.weight": (dim, heads * hd),
                       p + "mlp.gate_proj.weight": (hidden, dim), p + "mlp.up_proj.weight": (hidden, dim),
                       p + "mlp.down_proj.weight": (dim, hidden)})
    tensors = {}
    for name in sorted(shapes):
        shape = shapes[name]
        if len(shape) == 1:
            values = 1 + rng.uniform(-0.1, 0.1, size=shape)
        else:
            values = rng.uniform(-a, a, size=shape)
        tensors[name] = ("F32", values.astype("<f4").tobytes(), list(shape))
    os.makedirs(args.out, exist_ok=True)
    write_safetensors(os.path.join(args.out, "model.safetensors"), tensors)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(config, f, indent=2)
        f.write("\n")


def cmd_tiny(args):
    """A tiny llama model (dim 32, one layer, GQA 2/1) with an embedded tokenizer: the fuzz target's seeds."""
    llama_cpp_imports(args.llama_cpp, args.shim)
    import gguf
    from gguf import GGMLQuantizationType as Q
    from gguf.quants import quantize
    rng = np.random.default_rng(7)
    dim, hidden, vocab = 32, 64, 16
    writer = gguf.GGUFWriter(args.out, "llama")
    writer.add_context_length(64)
    writer.add_embedding_length(dim)
    writer.add_block_count(1)
    writer.add_feed_forward_length(hidden)
    writer.add_head_count(2)
    writer.add_head_count_kv(1)
    writer.add_layer_norm_rms_eps(1e-5)
    writer.add_rope_freq_base(10000.0)
    writer.add_rope_dimension_count(dim // 2)
    if args.kind == "llama":
        tokens = ["<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "\u2581", "a", "b", "c", "\u2581a", "ab", "\u2581ab",
                  "ba", "abc", "\u2581b", "<pad>"]
        types = [2, 3, 3, 6, 6] + [1] * 10 + [4]
        writer.add_tokenizer_model("llama")
        writer.add_token_scores([0.0] * 5 + [-float(i) for i in range(10)] + [0.0])
    else:
        tokens = ["<|endoftext|>", "a", "b", "c", "\u0120", "\u010a", "\u0120a", "ab", "\u0120ab", "ba", "abc",
                  "\u0120b", "bc", "cc", "\u0120c", "<|user|>"]
        types = [3] + [1] * 14 + [4]
        writer.add_tokenizer_model("gpt2")
        writer.add_tokenizer_pre("gpt-2")
        writer.add_token_merges(["\u0120 a", "a b", "\u0120a b", "b a", "ab c", "\u0120 b", "b c", "c c", "\u0120 c"])
    writer.add_token_list(tokens)
    writer.add_token_types(types)
    writer.add_bos_token_id(1 if args.kind == "llama" else 0)
    writer.add_eos_token_id(2 if args.kind == "llama" else 0)

    def add(name, shape, qtype):
        values = (rng.standard_normal(shape) * 0.2).astype(np.float32)
        if qtype == Q.F32:
            writer.add_tensor(name, values)
        elif qtype == Q.F16:
            writer.add_tensor(name, values.astype(np.float16))
        else:
            writer.add_tensor(name, quantize(values, qtype), raw_dtype=qtype)

    add("token_embd.weight", (vocab, dim), Q.Q8_0)
    add("blk.0.attn_norm.weight", (dim,), Q.F32)
    add("blk.0.attn_q.weight", (dim, dim), Q.F16)
    add("blk.0.attn_k.weight", (dim // 2, dim), Q.BF16)
    add("blk.0.attn_v.weight", (dim // 2, dim), Q.Q4_0)
    add("blk.0.attn_output.weight", (dim, dim), Q.F32)
    add("blk.0.ffn_norm.weight", (dim,), Q.F32)
    add("blk.0.ffn_gate.weight", (hidden, dim), Q.Q8_0)
    add("blk.0.ffn_up.weight", (hidden, dim), Q.F32)
    add("blk.0.ffn_down.weight", (dim, hidden), Q.Q8_0)
    add("output_norm.weight", (dim,), Q.F32)
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--llama-cpp", default=os.environ.get("LLAMA_CPP", "/tmp/peer/llama.cpp"))
    p.add_argument("--shim", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "../../shared/tools/llama-cpp-peer/shim"))
    sub = p.add_subparsers(dest="command", required=True)
    c = sub.add_parser("convert")
    c.add_argument("model")
    c.add_argument("--outtype", required=True)
    c.add_argument("--outfile", required=True)
    c.add_argument("--llama2c-tokenizer")
    r = sub.add_parser("reference")
    r.add_argument("gguf")
    r.add_argument("config")
    r.add_argument("out")
    b = sub.add_parser("bpe-tokenizer")
    b.add_argument("tokenizer_json")
    b.add_argument("n", type=int)
    b.add_argument("out")
    d = sub.add_parser("dequant-types")
    d.add_argument("gguf")
    d.add_argument("reference")
    m = sub.add_parser("random-model")
    m.add_argument("config")
    m.add_argument("out")
    m.add_argument("--seed", type=int, default=24)
    t = sub.add_parser("tiny")
    t.add_argument("kind", choices=["llama", "gpt2"])
    t.add_argument("out")
    args = p.parse_args()
    {"convert": cmd_convert, "reference": cmd_reference, "bpe-tokenizer": cmd_bpe_tokenizer,
     "dequant-types": cmd_dequant_types, "random-model": cmd_random_model, "tiny": cmd_tiny}[args.command](args)


if __name__ == "__main__":
    main()
