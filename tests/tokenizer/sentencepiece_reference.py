#!/usr/bin/python3
# tests/tokenizer/sentencepiece_reference.py: the independent reference of tests/tokenizer/sentencepiece_*_test.cpp,
# Google's Python binding of SentencePiece (Debian's python3-sentencepiece, run by Debian's /usr/bin/python3).
#
#   sentencepiece_reference.py train <corpus.txt> <out.model> llama2|unigram
#       trains a small model on the corpus: "llama2" with Llama 2's trainer settings (BPE, byte fallback, split
#       digits, identity normalization, whitespace kept), "unigram" with SentencePiece's defaults (Unigram, NFKC,
#       extra whitespace removed, no byte fallback, so unseen characters become <unk>)
#   sentencepiece_reference.py encode <model> <text file> <out.json>
#       writes {"ids": sp.encode(text), "decoded": sp.decode(ids)}
import io
import json
import sys

import sentencepiece as spm


def read_text(path):
    # Bytes decoded as UTF-8, so that "\r\n" reaches the tokenizer unchanged (text mode would translate it).
    with open(path, "rb") as f:
        return f.read().decode("utf-8")


def train(corpus, out, kind):
    settings = {
        "llama2": dict(model_type="bpe", vocab_size=1000, byte_fallback=True, split_digits=True,
                       normalization_rule_name="identity", remove_extra_whitespaces=False,
                       allow_whitespace_only_pieces=True, character_coverage=0.99995, max_sentencepiece_length=16),
        "unigram": dict(model_type="unigram", vocab_size=800),
    }[kind]
    model = io.BytesIO()
    spm.SentencePieceTrainer.train(sentence_iterator=iter(read_text(corpus).splitlines()), model_writer=model,
                                   num_threads=1, minloglevel=2, **settings)
    with open(out, "wb") as f:
        f.write(model.getvalue())


def encode(model, text_path, out):
    sp = spm.SentencePieceProcessor(model_file=model)
    ids = sp.encode(read_text(text_path))
    with open(out, "w", encoding="utf-8") as f:
        json.dump({"ids": ids, "decoded": sp.decode(ids)}, f)


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "train":
        train(*sys.argv[2:])
    elif len(sys.argv) == 5 and sys.argv[1] == "encode":
        encode(*sys.argv[2:])
    else:
        sys.exit("usage: sentencepiece_reference.py train <corpus> <out.model> llama2|unigram\n"
                 "       sentencepiece_reference.py encode <model> <text file> <out.json>")
