#!/usr/bin/env python3
# tests/tasks/longbench_reference.py: an independent Python reading of LongBench's English metrics, for
# test_longbench_metrics.cpp to compare kascade's C++ with on many generated cases. Standard library only: Python's
# own str.lower/str.split/re/difflib stand in for the Unicode and matching behaviour the C++ re-implements; the
# rouge 1.0.1 ROUGE-L (package not required) is re-derived here from its definition in rouge/rouge_score.py.
#
# Usage: longbench_reference.py CASES.json OUT.json. CASES is a list of {"kind", "prediction", "ground_truth",
# "all_classes", "first_line"}; OUT is the list of results (a number, or a string for "normalize").
import collections
import difflib
import json
import re
import string
import sys


def normalize(text):
    text = text.lower()
    text = "".join(c for c in text if c not in string.punctuation)
    text = re.sub(r"\b(a|an|the)\b", " ", text)
    return " ".join(text.split())


def qa_f1(prediction, truth):
    pred, gold = normalize(prediction).split(), normalize(truth).split()
    same = sum((collections.Counter(pred) & collections.Counter(gold)).values())
    if same == 0:
        return 0.0
    precision = 1.0 * same / len(pred)
    recall = 1.0 * same / len(gold)
    return (2 * precision * recall) / (precision + recall)


def rouge_l(prediction, truth):
    def sentences(text):
        return [" ".join(piece.split()) for piece in text.split(".") if len(piece) > 0]

    hyp, ref = sentences(prediction), sentences(truth)
    if not hyp or not ref:
        return 0.0  # rouge raises ValueError; LongBench's rouge_score catches it
    m = len({w for s in ref for w in s.split(" ")})
    n = len({w for s in hyp for w in s.split(" ")})
    union = set()
    for r in ref:
        x = r.split(" ")
        for h in hyp:
            y = h.split(" ")
            table = [[0] * (len(y) + 1) for _ in range(len(x) + 1)]
            for i in range(1, len(x) + 1):
                for j in range(1, len(y) + 1):
                    if x[i - 1] == y[j - 1]:
                        table[i][j] = table[i - 1][j - 1] + 1
                    else:
                        table[i][j] = max(table[i - 1][j], table[i][j - 1])
            i, j = len(x), len(y)
            while i > 0 and j > 0:
                if x[i - 1] == y[j - 1]:
                    union.add(x[i - 1])
                    i, j = i - 1, j - 1
                elif table[i - 1][j] > table[i][j - 1]:
                    i -= 1
                else:
                    j -= 1
    recall = len(union) / m
    precision = len(union) / n
    return 2.0 * ((precision * recall) / (precision + recall + 1e-8))


def classification(prediction, truth, all_classes):
    named = [c for c in all_classes if c in prediction]
    for term in named:  # removing while iterating, as LongBench does
        if term in truth and term != truth:
            named.remove(term)
    return 1.0 / len(named) if truth in named else 0.0


def share(prediction, number):
    numbers = re.findall(r"\d+", prediction)
    return 0.0 if not numbers else sum(x == number for x in numbers) / len(numbers)


def fuzz_ratio(a, b):
    if a == b:
        return 100
    if len(a) == 0 or len(b) == 0:
        return 0
    return int(round(100 * difflib.SequenceMatcher(None, a, b).ratio()))


def code_sim(prediction, truth):
    line = next((l for l in prediction.lstrip("\n").split("\n") if "`" not in l and "#" not in l and "//" not in l), "")
    return fuzz_ratio(line, truth) / 100


def score(case):
    kind, pred, truth = case["kind"], case["prediction"], case["ground_truth"]
    if case.get("first_line"):
        pred = pred.lstrip("\n").split("\n")[0]
    if kind == "normalize":
        return normalize(pred)
    if kind == "qa_f1_score":
        return qa_f1(pred, truth)
    if kind == "rouge_score":
        return rouge_l(pred, truth)
    if kind == "classification_score":
        return classification(pred, truth, case["all_classes"])
    if kind == "retrieval_score":
        return share(pred, re.findall(r"Paragraph (\d+)", truth)[0])
    if kind == "count_score":
        return share(pred, truth)
    if kind == "code_sim_score":
        return code_sim(pred, truth)
    if kind == "fuzz_ratio":
        return fuzz_ratio(pred, truth)
    raise ValueError(f"unknown case kind {kind!r}")


if __name__ == "__main__":
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)
    with open(sys.argv[2], "w", encoding="utf-8") as f:
        json.dump([score(c) for c in cases], f)
