#!/usr/bin/env python3
"""Golden outputs of Hugging Face `tokenizers` and `transformers` for the engine's tokenizer tests.

Run where both are installed (the GPU machine: tokenizers 0.23, transformers 5.x), from the
repository root, after tools/setup.sh has unpacked the tokenizers into third_party/tokenizers/:

    python3 tests/engine/data/make_tokenizer_goldens.py OUT_DIR

It writes OUT_DIR/tokenizer_goldens/<family>.json for every family found: token ids of each
string of tokenizer_corpus.json (add_special_tokens False, and True for a few), decodes that differ
from the input, decodes of every prefix of a few encodings (incomplete UTF-8 becomes U+FFFD), and
chat renders of chat_cases.json through apply_chat_template (or the error it raised). Copy the
directory to tests/engine/data/ and commit it.
"""
import json
import os
import sys

import tokenizers
import transformers
from tokenizers import Tokenizer

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", "..", ".."))
FAMILIES = ["qwen3", "qwen2_5", "llama3_1", "mistral_nemo", "llama2"]
SPECIAL_SAMPLES = [0, 1, 14, 16]  # corpus indexes also encoded with add_special_tokens=True
PREFIX_SAMPLES = [5, 6, 21]  # corpus indexes whose every prefix of ids is decoded


def encode_goldens(tok, corpus):
    out = {"encode": [], "encode_special": {}, "decode": {}, "decode_skip_special": {},
           "prefix_decodes": {}}
    for i, text in enumerate(corpus):
        ids = tok.encode(text, add_special_tokens=False).ids
        out["encode"].append(ids)
        decoded = tok.decode(ids, skip_special_tokens=False)
        if decoded != text:
            out["decode"][str(i)] = decoded
        skipped = tok.decode(ids, skip_special_tokens=True)
        if skipped != decoded:
            out["decode_skip_special"][str(i)] = skipped
    for i in SPECIAL_SAMPLES:
        out["encode_special"][str(i)] = tok.encode(corpus[i], add_special_tokens=True).ids
    for i in PREFIX_SAMPLES:
        ids = out["encode"][i]
        out["prefix_decodes"][str(i)] = [tok.decode(ids[:k]) for k in range(len(ids) + 1)]
    return out


def chat_goldens(family_dir, cases):
    tok = transformers.AutoTokenizer.from_pretrained(family_dir)
    renders = {}
    for case in cases:
        kwargs = {"add_generation_prompt": case["add_generation_prompt"], "tokenize": False}
        if "enable_thinking" in case:
            kwargs["enable_thinking"] = case["enable_thinking"]
        if "tools" in case:
            kwargs["tools"] = case["tools"]
        try:
            text = tok.apply_chat_template(case["messages"], **kwargs)
            renders[case["name"]] = {"text": text}
        except Exception as e:  # raise_exception() in the template, or a template error
            renders[case["name"]] = {"error": f"{type(e).__name__}: {e}"}
    return renders


def main():
    out_dir = os.path.join(sys.argv[1], "tokenizer_goldens")
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(HERE, "tokenizer_corpus.json"), encoding="utf-8") as f:
        corpus = json.load(f)
    with open(os.path.join(HERE, "chat_cases.json"), encoding="utf-8") as f:
        cases = json.load(f)
    for family in FAMILIES:
        family_dir = os.path.join(ROOT, "third_party", "tokenizers", family)
        if not os.path.exists(os.path.join(family_dir, "tokenizer.json")):
            print(f"{family}: missing, skipped")
            continue
        tok = Tokenizer.from_file(os.path.join(family_dir, "tokenizer.json"))
        golden = {"family": family, "tokenizers": tokenizers.__version__,
                  "transformers": transformers.__version__}
        golden.update(encode_goldens(tok, corpus))
        try:
            golden["chat"] = chat_goldens(family_dir, cases)
        except Exception as e:
            golden["chat_error"] = f"{type(e).__name__}: {e}"
        path = os.path.join(out_dir, f"{family}.json")
        with open(path, "w", encoding="utf-8") as f:
            json.dump(golden, f, ensure_ascii=False, separators=(",", ":"))
        print(f"{family}: {sum(len(x) for x in golden['encode'])} tokens -> {path}")


if __name__ == "__main__":
    main()
