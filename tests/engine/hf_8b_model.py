#!/usr/bin/env python3
"""The Llama-3.1-8B-shaped model of hf_8b_golden.py (random bf16 weights: normal(0, 0.02), norms 1,
seed 0, written by transformers' save_pretrained) without its golden runs: what
`kvtier_engine_bench --model DIR` needs when the goldens are not wanted (the batched decode figures
in docs/benchmarks.md). About 35 s on the H100 host.

Usage (torch, transformers, a GPU with ~20 GB free; no network):
    python3 tests/engine/hf_8b_model.py OUT_DIR
"""
import os
import sys
import time

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from hf_8b_golden import LLAMA31_8B  # noqa: E402  (the one definition of the shape)


@torch.no_grad()
def main():
    t0 = time.time()
    cfg = transformers.LlamaConfig(**LLAMA31_8B)
    with torch.device("meta"):
        model = transformers.AutoModelForCausalLM.from_config(
            cfg, attn_implementation="sdpa", torch_dtype=torch.bfloat16)
    model = model.to_empty(device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, p in model.named_parameters():
        if "norm" in name:
            p.fill_(1.0)
        else:
            p.normal_(0, 0.02, generator=gen)
    model.save_pretrained(sys.argv[1])
    print(f"saved {sys.argv[1]} in {time.time() - t0:.0f} s", flush=True)


if __name__ == "__main__":
    main()
