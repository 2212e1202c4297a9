#!/usr/bin/env python3
"""A Llama-3.1-8B-shaped model with random weights, written by transformers, and its outputs for one
prompt: what kvtier_engine_bench --golden compares the GPU backend with (docs/benchmarks.md).

Builds LlamaForCausalLM at the Llama-3.1-8B shape (the config of ../shared/peers/hf_llama_bench.py,
llama3 RoPE scaling, untied lm_head) on the GPU with seeded normal(0, 0.02) bf16 weights, saves it
with save_pretrained (config.json, generation_config.json, sharded safetensors: ~16 GB), then runs
one prompt of random ids through it in bf16 (SDPA) and through a float32 copy of the same weights,
recording each run's last-position logits and 32-step greedy continuation (KV cache, no eos stop).

Usage (torch, transformers, a GPU with ~60 GB free; no network):
    python3 tests/engine/hf_8b_golden.py OUT_DIR [--prompt-tokens 64]
Writes OUT_DIR/model/ (the model directory) and OUT_DIR/golden.json.
"""
import argparse
import json
import os
import time

import torch
import transformers

LLAMA31_8B = dict(vocab_size=128256, hidden_size=4096, intermediate_size=14336,
                  num_hidden_layers=32, num_attention_heads=32, num_key_value_heads=8,
                  max_position_embeddings=131072, rms_norm_eps=1e-5, rope_theta=500000.0,
                  rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                "original_max_position_embeddings": 8192, "rope_type": "llama3"},
                  tie_word_embeddings=False, bos_token_id=128000, eos_token_id=128001)
STEPS = 32


@torch.no_grad()
def run(model, ids):
    out = model(input_ids=ids)
    last = out.logits[0, -1].float()
    gen = model.generate(ids, max_new_tokens=STEPS, min_new_tokens=STEPS, do_sample=False,
                         pad_token_id=0, eos_token_id=None)
    return dict(last_logits=[float(f"{v:.6g}") for v in last.tolist()],
                greedy=gen[0, ids.shape[1]:].tolist())


@torch.no_grad()
def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--prompt-tokens", type=int, default=64)
    a = ap.parse_args()
    t0 = time.time()
    cfg = transformers.LlamaConfig(**LLAMA31_8B)
    with torch.device("meta"):  # as hf_llama_bench.py builds it: bf16 from the start
        model = transformers.AutoModelForCausalLM.from_config(
            cfg, attn_implementation="sdpa", torch_dtype=torch.bfloat16)
    model = model.to_empty(device="cuda")
    gen = torch.Generator(device="cuda").manual_seed(0)
    for name, p in model.named_parameters():
        if "norm" in name:
            p.fill_(1.0)
        else:
            p.normal_(0, 0.02, generator=gen)
    model.model.rotary_emb.__init__(config=cfg, device="cuda")  # to_empty left inv_freq garbage
    model.eval()
    path = os.path.join(a.out, "model")
    model.save_pretrained(path)
    print(f"saved {path} in {time.time() - t0:.0f} s", flush=True)
    ids = torch.randint(0, cfg.vocab_size, (1, a.prompt_tokens), device="cuda",
                        generator=torch.Generator(device="cuda").manual_seed(1))
    golden = dict(ids=ids[0].tolist(), transformers=transformers.__version__,
                  torch=torch.__version__)
    golden["hf_bf16"] = run(model, ids)
    model = model.float()
    golden["hf_fp32"] = run(model, ids)
    with open(os.path.join(a.out, "golden.json"), "w") as f:
        json.dump(golden, f)
    print(f"golden in {time.time() - t0:.0f} s: bf16 greedy {golden['hf_bf16']['greedy'][:8]}, "
          f"fp32 greedy {golden['hf_fp32']['greedy'][:8]}", flush=True)


if __name__ == "__main__":
    main()
