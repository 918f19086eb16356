#!/usr/bin/python3
"""Trains kascade's long-context test model: a small Llama that retrieves a passkey or a keyed "magic number"
over thousands of tokens, so that a sparse-attention method that drops the needle's keys visibly fails.

Writes the Hugging Face layout kascade loads (config.json, model.safetensors, and the tokenizer
tok512.bin) plus reference_greedy.json (prompts and this script's own greedy answers, which a kascade
test compares token for token). Deterministic from --seed on one thread.

Needs Debian's python3-torch and python3-numpy only (scripts/setup.sh --with-training installs them); kascade itself
never needs them.

    scripts/train_retrieval_model.py --out tests/fixtures/retrieval-model --seed 1

Design (see tests/fixtures/retrieval-model/MODEL_CARD.md for the measured result; every choice below was measured
on the 2-core dev VM, and the alternatives in parentheses did not learn in the time tried):
- Tokens are those of stories260K's tok512.bin (llama2.c format, 512 pieces trained on TinyStories, byte fallback),
  encoded as run.c and kascade do; the tokenizer file is copied beside the model. (A byte-level vocabulary: " key is"
  and " sky is" of the filler then differ only 5 tokens back.)
- Prompts follow the task formats kascade generates (pipeline/tasks/): the Landmark-attention passkey prompt and
  RULER's needle prompts ("One of the special magic numbers for KEY is: VALUE."), single key, several keys (one
  asked for), several values and several queries. Loss weights: 1 on the answer (+ </s>), 0.5 on the needles
  (a passkey needle holds its number twice), 0.05 on the rest.
- Every step also trains the induction task (random strings written twice; see copy_loss). (Without it the answer
  loss stayed at chance for 700+ steps.)
- Curriculum: 2 layers first (a 4-layer model from scratch did not learn retrieval in 900 steps), grown to 4 at
  --grow-at with zero output projections (the same function, then trained); passkey alone with 30-60-token
  haystacks first (64-384 from the start: no learning in 350 steps), then the task mix, haystacks growing to
  192-384 tokens, and position ids that jump by a random gap after the needles (PoSE) in up to 80 % of the
  samples, so needle distances up to --max-distance are seen while sequences stay short. Stage 2 trains real
  contiguous prompts of 1-4K tokens: without it attention at the answer spreads over the haystack (dilution).
- Memory: a process keeps what it frees (glibc tunables, see reexec_with_reused_memory), about 9-14 GB at the end:
  run one training at a time on a 24 GB machine.
"""
import argparse
import json
import math
import os
import random
import shutil
import struct
import sys
import time

import numpy as np
import torch
import torch.nn.functional as F

BOS, EOS, VOCAB = 1, 2, 512  # llama2.c's tokenizer.bin ids (stories260K's tok512.bin has 512 tokens)

# The classic filler of the passkey test (Landmark attention), the default haystack of `kascade task`.
FILLER = "The grass is green. The sky is blue. The sun is yellow. Here we go. There and back again. "

PASSKEY_INTRO = ("There is an important info hidden inside a lot of irrelevant text. Find it and memorize them. "
                 "I will quiz you about the important information there.\n")
NIAH_INTRO = ("Some special magic numbers are hidden within the following text. Make sure to memorize it. "
              "I will quiz you about the numbers afterwards.\n")


class Llama2cTokenizer:
    """llama2.c's tokenizer.bin encoding, as run.c (and kascade) does it: a dummy-prefix space, one symbol per UTF-8
    character (bytes + 3 where the character is no piece), then the highest-scoring merge, leftmost first, until none
    applies. No piece of tok512.bin holds a space after its first byte, so no merge crosses a space: each
    space-started chunk is merged alone, and cached."""

    def __init__(self, path):
        data = open(path, "rb").read()
        offset = 4
        self.pieces, self.scores = [], []
        while offset < len(data):
            score, length = struct.unpack_from("<fi", data, offset)
            offset += 8
            self.pieces.append(data[offset:offset + length])
            self.scores.append(score)
            offset += length
        assert len(self.pieces) == VOCAB, f"{path}: {len(self.pieces)} tokens, expected {VOCAB}"
        assert not any(b" " in p[1:] for p in self.pieces), "a piece with an inner space: chunking would be wrong"
        self.ids = {p: i for i, p in enumerate(self.pieces)}
        self.cache = {}

    def _chunk(self, chunk):
        if chunk in self.cache:
            return self.cache[chunk]
        symbols = []
        for ch in chunk:
            b = ch.encode("utf-8")
            symbols += [self.ids[b]] if b in self.ids else [x + 3 for x in b]
        while True:
            best, best_score = -1, -1e10
            for i in range(len(symbols) - 1):
                j = self.ids.get(self.pieces[symbols[i]] + self.pieces[symbols[i + 1]])
                if j is not None and self.scores[j] > best_score:
                    best, best_score, best_id = i, self.scores[j], j
            if best < 0:
                break
            symbols[best:best + 2] = [best_id]
        self.cache[chunk] = symbols
        return symbols

    def encode(self, text):
        if not text:
            return []
        text = " " + text
        out, start = [], 0
        for i in range(1, len(text) + 1):
            if i == len(text) or text[i] == " ":
                out += self._chunk(text[start:i])
                start = i
        return out


TOKENIZER = None
TOKENIZER_PATH = None


def encode(text):
    return TOKENIZER.encode(text)


# --- prompts -------------------------------------------------------------------------------------------------------

SYLLABLES_C = "bcdfghjklmnprstvwz"
SYLLABLES_V = "aeiou"


def random_word(rng):
    return "".join(rng.choice(SYLLABLES_C) + rng.choice(SYLLABLES_V) for _ in range(rng.randint(2, 4)))


def random_key(rng):
    return random_word(rng) + "-" + random_word(rng)


def haystack_sentences(rng, haystack_text):
    """An endless stream of haystack sentences: the filler, or sentences of a real text."""
    if haystack_text is None or rng.random() < 0.75:
        sentences = [s.strip() + "." for s in FILLER.split(".") if s.strip()]
        while True:
            for s in sentences:
                yield s
    while True:
        start = rng.randrange(0, len(haystack_text) - 4096)
        chunk = haystack_text[start:start + 4096].replace("\n", " ")
        for s in chunk.split(". ")[1:-1]:
            if s.strip():
                yield s.strip() + "."


TASK_MIX = {"passkey": 40, "single": 15, "multikey": 30, "multivalue": 7.5, "multiquery": 7.5}


def make_sample(rng, n_haystack_tokens, haystack_text, mix=None):
    """One training prompt: (intro, [haystack pieces with needles], question, answer) as byte strings.

    Returns (prompt_tokens, needle_end_index, answer_tokens, prompt_text, needle_spans): BOS + the prompt's tokens,
    where the last needle ends (PoSE puts its gap after it), the answer's tokens + EOS, the prompt's text, and the
    [begin, end) token spans of the needles."""
    mix = mix or TASK_MIX
    kind = rng.choices(list(mix), list(mix.values()))[0]
    if kind == "passkey":
        n = rng.randint(10000, 99999)
        intro = PASSKEY_INTRO
        needles = [f"The pass key is {n}. Remember it. {n} is the pass key."]
        question = "What is the pass key? The pass key is"
        answer = f" {n}"
    else:
        intro = NIAH_INTRO
        keys = [random_key(rng)]
        n_values = rng.randint(2, 4) if kind == "multivalue" else 1
        n_keys = rng.randint(2, 6) if kind in ("multikey", "multiquery") else 1
        while len(keys) < n_keys:
            k = random_key(rng)
            if k not in keys:
                keys.append(k)
        pairs = []
        for k in keys:
            for _ in range(n_values):
                pairs.append((k, rng.randint(1000000, 9999999)))
        rng.shuffle(pairs)
        needles = [f"One of the special magic numbers for {k} is: {v}." for k, v in pairs]
        if kind == "multiquery":
            asked = rng.sample(keys, rng.randint(2, min(4, len(keys))))
            query = ", ".join(asked[:-1]) + ", and " + asked[-1]
            question = (f"What are all the special magic numbers for {query} mentioned in the provided text? "
                        f"The special magic numbers for {query} mentioned in the provided text are")
            answer = " " + ", ".join(str(v) for a in asked for k, v in pairs if k == a)
        elif kind == "multivalue":
            k = keys[0]
            question = (f"What are all the special magic numbers for {k} mentioned in the provided text? "
                        f"The special magic numbers for {k} mentioned in the provided text are")
            answer = " " + ", ".join(str(v) for kk, v in pairs if kk == k)
        else:
            k = rng.choice(keys)
            question = (f"What is the special magic number for {k} mentioned in the provided text? "
                        f"The special magic number for {k} mentioned in the provided text is")
            answer = " " + str(next(v for kk, v in pairs if kk == k))

    # Haystack sentences up to the length (about 3 characters a token), the needles at random sentence boundaries,
    # laid out as kascade's task prompts are (pipeline/tasks/task_prompt.cpp): intro, "piece " per sentence or needle,
    # a cut at a character near the end, "\n", the question.
    stream = haystack_sentences(rng, haystack_text)
    sentences, total = [], 0
    while total < 3 * n_haystack_tokens:
        sentence = next(stream)
        sentences.append(sentence)
        total += len(sentence) + 1
    positions = sorted(rng.randint(0, len(sentences)) for _ in needles)
    text, needle_end_char, n_placed, needle_spans = intro, len(intro), 0, []
    for i in range(len(sentences) + 1):
        while positions and positions[0] == i:
            positions.pop(0)
            needle_spans.append((len(text), len(text) + len(needles[n_placed])))
            text += needles[n_placed] + " "
            n_placed += 1
            needle_end_char = len(text)
        if i < len(sentences):
            text += sentences[i] + " "
    text = text[:max(needle_end_char, len(text) - rng.randint(0, 20))]
    prompt_text = text + "\n" + question
    needle_end = len(encode(text[:needle_end_char]))
    # Token spans of the needles (+1: BOS), whose language-model loss trains copying (a passkey needle holds its
    # number twice).
    spans = [(1 + len(encode(text[:a])), 1 + len(encode(text[:b]))) for a, b in needle_spans]
    return [BOS] + encode(prompt_text), needle_end + 1, answer_tokens(answer), prompt_text, spans


def answer_tokens(answer):
    """The answer's tokens as they follow the prompt: encode() adds a dummy-prefix space, which the answer's own
    leading space stands for."""
    return encode(answer[1:]) + [EOS]


# --- model (Hugging Face Llama semantics, as kascade's transformer) ---------------------------------------------

class Llama(torch.nn.Module):
    def __init__(self, c):
        super().__init__()
        self.c = c
        d, h, kv, hd, ff = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], \
            c["intermediate_size"]
        self.embed = torch.nn.Embedding(VOCAB, d)
        self.layers = torch.nn.ModuleList(self.new_layer() for _ in range(c["num_hidden_layers"]))
        self.norm = torch.nn.Parameter(torch.ones(d))
        torch.nn.init.normal_(self.embed.weight, std=0.02)
        hd = c["head_dim"]
        self.register_buffer("inv_freq", 1.0 / (c["rope_theta"] ** (torch.arange(0, hd, 2, dtype=torch.float64) / hd)),
                             persistent=False)

    def new_layer(self):
        c = self.c
        d, h, kv, hd, ff = c["hidden_size"], c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"], \
            c["intermediate_size"]
        layer = torch.nn.Module()
        layer.q = torch.nn.Linear(d, h * hd, bias=False)
        layer.k = torch.nn.Linear(d, kv * hd, bias=False)
        layer.v = torch.nn.Linear(d, kv * hd, bias=False)
        layer.o = torch.nn.Linear(h * hd, d, bias=False)
        layer.gate = torch.nn.Linear(d, ff, bias=False)
        layer.up = torch.nn.Linear(d, ff, bias=False)
        layer.down = torch.nn.Linear(ff, d, bias=False)
        layer.norm1 = torch.nn.Parameter(torch.ones(d))
        layer.norm2 = torch.nn.Parameter(torch.ones(d))
        for p in layer.parameters():
            if p.dim() == 2:
                torch.nn.init.normal_(p, std=0.02)
        return layer

    def grow(self, n_layers):
        """Appends layers whose output projections are zero: the model computes the same function, and the new
        layers learn from there (a 2-layer model learns retrieval within ~500 steps here, a 4-layer one from scratch
        not within 900)."""
        while len(self.layers) < n_layers:
            layer = self.new_layer()
            torch.nn.init.zeros_(layer.o.weight)
            torch.nn.init.zeros_(layer.down.weight)
            self.layers.append(layer)
        self.c["num_hidden_layers"] = n_layers

    def rms(self, x, w):
        x32 = x.float()
        return (x32 * torch.rsqrt(x32.pow(2).mean(-1, keepdim=True) + self.c["rms_norm_eps"])) * w

    def rope(self, x, pos):
        freqs = pos.double()[:, :, None] * self.inv_freq[None, None, :]  # [B, T, hd/2]
        emb = torch.cat([freqs, freqs], dim=-1)
        cos, sin = emb.cos().float()[:, None], emb.sin().float()[:, None]
        half = x.shape[-1] // 2
        rotated = torch.cat([-x[..., half:], x[..., :half]], dim=-1)
        return x * cos + rotated * sin

    def forward(self, tokens, pos):
        c = self.c
        B, T = tokens.shape
        h, kv, hd = c["num_attention_heads"], c["num_key_value_heads"], c["head_dim"]
        x = self.embed(tokens)
        mask = torch.full((T, T), float("-inf")).triu(1)
        for layer in self.layers:
            a = self.rms(x, layer.norm1)
            q = layer.q(a).view(B, T, h, hd).transpose(1, 2)
            k = layer.k(a).view(B, T, kv, hd).transpose(1, 2)
            v = layer.v(a).view(B, T, kv, hd).transpose(1, 2)
            q, k = self.rope(q.float(), pos), self.rope(k.float(), pos)
            k = k.repeat_interleave(h // kv, dim=1)
            v = v.repeat_interleave(h // kv, dim=1)
            scores = ((q * (1.0 / math.sqrt(hd))) @ k.transpose(-1, -2)).float() + mask
            att = torch.softmax(scores, dim=-1).to(v.dtype) @ v
            x = x + layer.o(att.transpose(1, 2).reshape(B, T, h * hd))
            m = self.rms(x, layer.norm2)
            x = x + layer.down(F.silu(layer.gate(m)) * layer.up(m))
        return self.rms(x, self.norm) @ self.embed.weight.t().to(x.dtype)


def batch_from_samples(samples, pose_gap, needle_weight):
    """Pads samples to one length. pose_gap(i) gives the position jump after sample i's last needle. Loss weights:
    1 on the answer, needle_weight on the needles' tokens, 0.05 on the rest."""
    seqs, weights, positions = [], [], []
    for i, (prompt, needle_end, answer, _, spans) in enumerate(samples):
        seq = prompt + answer
        w = [0.05] * (len(prompt) - 1) + [1.0] * len(answer)
        for a, b in spans:  # weight w[j] scores the prediction of token j + 1
            for j in range(max(0, a - 1), min(b - 1, len(prompt) - 1)):
                w[j] = needle_weight
        gap = pose_gap(i)
        pos = list(range(needle_end)) + [p + gap for p in range(needle_end, len(seq))]
        seqs.append(seq)
        weights.append(w)
        positions.append(pos)
    # Padded to a multiple of 512: a handful of distinct shapes, so freed blocks are reused (with every length
    # distinct, the memory this process keeps grew by 3 GB a minute on 2K-token batches).
    T = -(-max(len(s) for s in seqs) // 512) * 512
    tok = torch.full((len(seqs), T), EOS, dtype=torch.long)
    wt = torch.zeros((len(seqs), T - 1))
    answer = torch.zeros((len(seqs), T - 1), dtype=torch.bool)
    pos = torch.zeros((len(seqs), T), dtype=torch.long)
    for i, (s, w, p) in enumerate(zip(seqs, weights, positions)):
        tok[i, :len(s)] = torch.tensor(s)
        wt[i, :len(w)] = torch.tensor(w)
        answer[i, len(s) - 1 - len(samples[i][2]):len(s) - 1] = True
        pos[i, :len(p)] = torch.tensor(p)
        pos[i, len(p):] = p[-1] + 1 + torch.arange(T - len(p))
    return tok, wt, pos, answer


def copy_loss(model, n=8, length=20):
    """Random token strings written twice, scored on the second copy: the induction task. Mixed into every step it
    forms the copying heads retrieval is built on; without it the answer loss sat at chance (uniform digits) for 700+
    passkey steps, with it it fell below 0.3 in 550 (measured on this machine)."""
    x = torch.randint(3, VOCAB, (n, length))
    tok = torch.cat([torch.full((n, 1), BOS, dtype=torch.long), x, x], dim=1)
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(tok[:, :-1], torch.arange(2 * length)[None].repeat(n, 1))
    return F.cross_entropy(logits.float()[:, length:].reshape(-1, VOCAB), tok[:, length + 1:].reshape(-1))


def answer_loss(model, tok, wt, pos, answer):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        logits = model(tok[:, :-1], pos[:, :-1])
    nll = F.cross_entropy(logits.float().reshape(-1, VOCAB), tok[:, 1:].reshape(-1), reduction="none")
    nll = nll.view(wt.shape)
    return (nll * wt).sum() / wt.sum(), (nll * answer).sum() / answer.sum()


@torch.no_grad()
def greedy(model, prompt, max_new=16):
    """Greedy answer in fp32 without autocast: the reference kascade's forward is compared with."""
    toks = list(prompt)
    out = []
    for _ in range(max_new):
        t = torch.tensor([toks])
        logits = model(t, torch.arange(len(toks))[None])[0, -1]
        nxt = int(torch.argmax(logits))
        if nxt == EOS:
            break
        out.append(nxt)
        toks.append(nxt)
    return out


def eval_accuracy(model, rng, length, n, haystack_text):
    correct = 0
    for _ in range(n):
        prompt, _, answer, _, _ = make_sample(rng, length - 60, haystack_text)
        got = greedy(model, prompt, max_new=len(answer) + 2)
        correct += got == answer[:-1]
    return correct / n


# --- writing the Hugging Face layout ---------------------------------------------------------------------------

def write_safetensors(path, tensors):
    header, blobs, offset = {}, [], 0
    for name, t in tensors.items():
        data = t.detach().contiguous().float().numpy().astype("<f4").tobytes()
        header[name] = {"dtype": "F32", "shape": list(t.shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    header["__metadata__"] = {"format": "pt"}
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path + ".tmp", "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)
    os.replace(path + ".tmp", path)


def write_model(model, out, config):
    os.makedirs(out, exist_ok=True)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(config, f, indent=1)
    t = {"model.embed_tokens.weight": model.embed.weight, "model.norm.weight": model.norm}
    for i, layer in enumerate(model.layers):
        p = f"model.layers.{i}."
        t[p + "self_attn.q_proj.weight"] = layer.q.weight
        t[p + "self_attn.k_proj.weight"] = layer.k.weight
        t[p + "self_attn.v_proj.weight"] = layer.v.weight
        t[p + "self_attn.o_proj.weight"] = layer.o.weight
        t[p + "mlp.gate_proj.weight"] = layer.gate.weight
        t[p + "mlp.up_proj.weight"] = layer.up.weight
        t[p + "mlp.down_proj.weight"] = layer.down.weight
        t[p + "input_layernorm.weight"] = layer.norm1
        t[p + "post_attention_layernorm.weight"] = layer.norm2
    write_safetensors(os.path.join(out, "model.safetensors"), t)
    shutil.copyfile(TOKENIZER_PATH, os.path.join(out, "tok512.bin"))  # kascade finds tok*.bin beside the model


def load_weights(model, path):
    """Reads an F32 model.safetensors written by write_model back into the model."""
    data = open(path, "rb").read()
    n = struct.unpack_from("<Q", data)[0]
    header = json.loads(data[8:8 + n])
    tensors = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        a, b = info["data_offsets"]
        tensors[name] = torch.from_numpy(np.frombuffer(data[8 + n + a:8 + n + b], dtype="<f4").copy()).view(
            info["shape"])
    with torch.no_grad():
        model.embed.weight.copy_(tensors["model.embed_tokens.weight"])
        model.norm.copy_(tensors["model.norm.weight"])
        for i, layer in enumerate(model.layers):
            p = f"model.layers.{i}."
            for attr, name in (("q", "self_attn.q_proj"), ("k", "self_attn.k_proj"), ("v", "self_attn.v_proj"),
                               ("o", "self_attn.o_proj"), ("gate", "mlp.gate_proj"), ("up", "mlp.up_proj"),
                               ("down", "mlp.down_proj")):
                getattr(layer, attr).weight.copy_(tensors[p + name + ".weight"])
            layer.norm1.copy_(tensors[p + "input_layernorm.weight"])
            layer.norm2.copy_(tensors[p + "post_attention_layernorm.weight"])


# --- training --------------------------------------------------------------------------------------------------

def reexec_with_reused_memory():
    """This VM faults fresh pages in slowly (a new 32 MB tensor took 120 ms, reused memory 2 ms): keep freed memory in
    the process (glibc tunables must be set before it starts)."""
    tunables = "glibc.malloc.mmap_threshold=1073741824:glibc.malloc.trim_threshold=4294967296"
    if tunables not in os.environ.get("GLIBC_TUNABLES", ""):
        os.environ["GLIBC_TUNABLES"] = tunables
        os.execv(sys.executable, [sys.executable] + sys.argv)


def main():
    reexec_with_reused_memory()
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="output folder (written when training ends)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--tokenizer", help="stories260K's tok512.bin (default: $KASCADE_ASSETS or ../shared, "
                                        "models/stories260K/tok512.bin)")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (1 was fastest on the 2-core machine)")
    ap.add_argument("--haystack-text", help="a text file whose sentences form part of the haystacks (else filler only)")
    ap.add_argument("--stage1-steps", type=int, default=1300)
    ap.add_argument("--stage2-steps", type=int, default=250)
    ap.add_argument("--stage2-lengths", default="2048",
                    help="stage 2: prompt lengths, one per step in turn (batch 4096 // length; e.g. 2048,4096)")
    ap.add_argument("--max-distance", type=int, default=24576, help="stage 1: needle distances up to this many positions")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--start-layers", type=int, default=2, help="train this many layers first (0: --layers)")
    ap.add_argument("--grow-at", type=int, default=800, help="step at which the model grows to --layers")
    ap.add_argument("--stop-at", type=int, default=0, help="stop before this step and write the model (0: at the end)")
    ap.add_argument("--init-from", help="continue from this checkpoint folder (written by this script)")
    ap.add_argument("--init-step", type=int, default=0, help="with --init-from: the step to continue at")
    ap.add_argument("--lr", type=float, default=2e-3, help="peak learning rate (AdamW, warm-up then cosine)")
    ap.add_argument("--passkey-steps", type=int, default=600, help="stage 1 starts with this many passkey-only steps")
    ap.add_argument("--needle-weight", type=float, default=0.5,
                    help="loss weight of the needles' tokens (their repeated number teaches copying)")
    ap.add_argument("--log-every", type=int, default=50)
    ap.add_argument("--reference-prompts", type=int, default=24, help="prompts of reference_greedy.json")
    ap.add_argument("--eval-samples", type=int, default=10, help="greedy accuracy check per length at the end")
    args = ap.parse_args()

    global TOKENIZER, TOKENIZER_PATH
    assets = os.environ.get("KASCADE_ASSETS",
                            os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "shared"))
    TOKENIZER_PATH = args.tokenizer or os.path.join(assets, "models", "stories260K", "tok512.bin")
    TOKENIZER = Llama2cTokenizer(TOKENIZER_PATH)
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = random.Random(args.seed)
    haystack_text = open(args.haystack_text, encoding="utf-8").read() if args.haystack_text else None

    config = {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama", "hidden_size": 128,
        "intermediate_size": 256, "num_hidden_layers": args.layers, "num_attention_heads": 4,
        "num_key_value_heads": 2, "head_dim": 32, "hidden_act": "silu", "max_position_embeddings": 32768,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "tie_word_embeddings": True, "vocab_size": VOCAB,
        "bos_token_id": BOS, "eos_token_id": EOS, "torch_dtype": "float32",
    }
    model = Llama({**config, "num_hidden_layers": args.start_layers or args.layers})
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params} parameters, {len(model.layers)} layers", flush=True)

    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
    total = args.stage1_steps + args.stage2_steps
    t0 = time.time()
    ema = None
    start = 0
    if args.init_from:
        # Continue from a checkpoint this script wrote (its weights; the optimizer starts afresh) at --init-step.
        model.grow(json.load(open(os.path.join(args.init_from, "config.json")))["num_hidden_layers"])
        load_weights(model, os.path.join(args.init_from, "model.safetensors"))
        opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
        start = args.init_step
        rng = random.Random(args.seed * 1000003 + start)
        torch.manual_seed(args.seed * 1000003 + start)
        print(f"continuing from {args.init_from} at step {start}", flush=True)
    for step in range(start, args.stop_at or total):
        if step == args.grow_at and len(model.layers) < args.layers:
            model.grow(args.layers)
            opt = torch.optim.AdamW(model.parameters(), lr=args.lr, betas=(0.9, 0.95), weight_decay=0.01)
            print(f"step {step}: grown to {args.layers} layers", flush=True)
        lr = args.lr * min(1.0, (step + 1) / 100) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * step / total)))
        for g in opt.param_groups:
            g["lr"] = lr
        if step < args.stage1_steps:
            # Short haystacks, positions jumping after the needles: distances up to max_distance.
            batch = 8
            # Passkey alone first: its fixed question is the easiest retrieval to learn, and the mechanism carries over.
            mix = {"passkey": 1} if step < args.passkey_steps else None
            # Short haystacks first (30-60 tokens), growing to 192-384 after the passkey steps: with 64-384 from the
            # start the passkey answer loss stayed at chance for 350 steps, with 30-60 it fell within 500.
            longest = min(384, 60 + max(0, step - args.passkey_steps) // 2)
            samples = [make_sample(rng, rng.randint(longest // 2, longest), haystack_text, mix) for _ in range(batch)]
            # Gaps only once retrieval works at short range: their share grows from 0 to 80 % after the passkey steps.
            share = 0.8 * min(1.0, max(0.0, (step - args.passkey_steps) / 300))
            gaps = [rng.randint(0, args.max_distance - 600) if rng.random() < share else 0 for _ in range(batch)]
            tok, wt, pos, answer = batch_from_samples(samples, lambda i: gaps[i], args.needle_weight)
        else:
            # Real contiguous prompts: the answer must be found among many filler keys. Few shapes (one batch of
            # 4096 tokens a step): with lengths drawn at random the memory the process retained grew past 23 GB.
            lengths = [int(x) for x in args.stage2_lengths.split(",")]
            length = lengths[step % len(lengths)]
            batch = max(1, 4096 // length)
            samples = [make_sample(rng, length - 60, haystack_text) for _ in range(batch)]
            tok, wt, pos, answer = batch_from_samples(samples, lambda i: 0, args.needle_weight)
        loss, ans = answer_loss(model, tok, wt, pos, answer)
        opt.zero_grad()
        (loss + copy_loss(model)).backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        ema = ans.item() if ema is None else 0.98 * ema + 0.02 * ans.item()
        if step % args.log_every == 0 or step == total - 1:
            print(f"step {step}/{total} stage {1 if step < args.stage1_steps else 2} loss {loss.item():.4f} "
                  f"answer {ans.item():.4f} (ema {ema:.4f}) lr {lr:.2e} {time.time() - t0:.0f}s", flush=True)
        if step % 500 == 499 or step == total - 1:
            write_model(model, args.out, model.c)

    model.eval()
    eval_rng = random.Random(args.seed + 1000)
    for length in (1024, 2048, 4096) if args.eval_samples > 0 else ():
        print(f"greedy exact answers (task mix) at {length}: {eval_accuracy(model, eval_rng, length, args.eval_samples, None):.2f}",
              flush=True)

    # Reference greedy answers of this forward (fp32), which kascade must reproduce token for token.
    ref_rng = random.Random(args.seed + 2000)
    refs = []
    for i in range(args.reference_prompts):
        length = [256, 512, 1024, 2048][i % 4]
        prompt, _, _, text, _ = make_sample(ref_rng, length - 60, None)
        refs.append({"prompt": text, "prompt_tokens": len(prompt),
                     "greedy": greedy(model, prompt, max_new=12)})
    write_model(model, args.out, model.c)
    with open(os.path.join(args.out, "reference_greedy.json"), "w") as f:
        json.dump({"note": "greedy tokens of scripts/train_retrieval_model.py's fp32 forward after <s> + prompt, "
                           "at most 12, stopping at </s>", "samples": refs}, f, indent=1)
    print(f"wrote {args.out} in {time.time() - t0:.0f}s", flush=True)


if __name__ == "__main__":
    sys.exit(main())
