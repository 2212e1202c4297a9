#!/usr/bin/env python3
"""Greedy goldens the GPU backend can be held to token for token (engine_gpu_golden_test).

The GPU computes in bf16 (or fp16) what transformers computes in float32 for the committed tiny
models (make_models.py), so a logit moves by its rounding (~1e-2 in bf16). A greedy step whose top
two logits are closer than that may flip, and a flipped token changes the whole continuation; the
goldens of make_models.py have margins down to 3e-3. So for each committed model this script
searches seeded random prompts for those whose 32-step greedy continuation, as transformers
computes it in float32, keeps every top-1/top-2 margin at least MIN_MARGIN, and records the two
best-margined prompts of each length, their continuation recomputed from scratch each step (no KV
cache, as make_models.py does).

Usage (torch and transformers; no network): python3 tests/engine/data/make_gpu_goldens.py [MODELS]
MODELS defaults to tests/engine/data/models; writes MODELS/<name>/golden_gpu.json.
"""
import json
import os
import sys

import torch
import transformers

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_models  # noqa: E402  (the same model classes and greedy reference)

MIN_MARGIN = 0.06      # several times the bf16 logit error measured on these models
LENGTHS = (20, 90)     # within one block and the Mistral window; across blocks and past the window
CANDIDATES = 16384     # prompts tried per length
BATCH = 2048
STEPS = make_models.GREEDY_STEPS


@torch.no_grad()
def min_margins(model, prompts):
    """Each prompt's smallest greedy top-1/top-2 margin over STEPS steps (batched, KV cache), or
    -1 for a degenerate continuation (fewer than 4 distinct tokens, as make_models.py refuses)."""
    out = model(input_ids=prompts, use_cache=True)
    past, logits = out.past_key_values, out.logits[:, -1].float()
    worst = torch.full((prompts.shape[0],), float("inf"), device=prompts.device)
    tokens = []
    for step in range(STEPS):
        top2 = torch.topk(logits, 2, dim=-1).values
        worst = torch.minimum(worst, top2[:, 0] - top2[:, 1])
        token = torch.argmax(logits, dim=-1, keepdim=True)
        tokens.append(token)
        if step + 1 == STEPS:
            break
        out = model(input_ids=token, past_key_values=past, use_cache=True)
        past, logits = out.past_key_values, out.logits[:, -1].float()
    tokens = torch.cat(tokens, dim=1)
    distinct = torch.tensor([len(set(row.tolist())) for row in tokens.cpu()], device=worst.device)
    return torch.where(distinct >= 4, worst, torch.full_like(worst, -1.0))


def search(model, length, seed):
    """The two best-margined prompts of `length` tokens, by the margins `model` computes (on the GPU
    when there is one: the search is only a filter; the goldens are recomputed on the CPU)."""
    gen = torch.Generator().manual_seed(seed)
    device = next(model.parameters()).device
    best = []
    for _ in range(CANDIDATES // BATCH):
        prompts = torch.randint(3, make_models.VOCAB, (BATCH, length), generator=gen)
        margins = min_margins(model, prompts.to(device)).cpu()
        best += [(float(m), prompts[i].tolist()) for i, m in enumerate(margins)]
        best = sorted(best, key=lambda x: -x[0])[:2]
    return best


def main():
    models_dir = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "models")
    torch.set_num_threads(max(1, os.cpu_count() or 1))
    for index, name in enumerate(make_models.MODELS):
        _, model_cls, _, _ = make_models.MODELS[name]
        path = os.path.join(models_dir, name)
        model = model_cls.from_pretrained(path, dtype=torch.float32,
                                          attn_implementation="eager").eval()
        searcher = model_cls.from_pretrained(path, dtype=torch.float32,
                                             attn_implementation="eager").eval()
        if torch.cuda.is_available():
            torch.backends.cuda.matmul.allow_tf32 = False
            searcher = searcher.to("cuda")
        golden = dict(model=name, transformers=transformers.__version__, torch=torch.__version__,
                      min_margin_required=MIN_MARGIN, prompts=[])
        for length in LENGTHS:
            for margin, ids in search(searcher, length, seed=5000 + 10 * index + length):
                g = make_models.greedy(model, ids)
                if g["min_margin"] < MIN_MARGIN:
                    print(f"warning: {name}: no prompt of {length} tokens out of {CANDIDATES} keeps "
                          f"a greedy margin of {MIN_MARGIN}; kept the best ({g['min_margin']:.4f})",
                          flush=True)
                golden["prompts"].append(dict(ids=ids, greedy=g))
        with open(os.path.join(path, "golden_gpu.json"), "w") as f:
            json.dump(golden, f, separators=(",", ":"))
        print(f"== {name}: margins", [round(p["greedy"]["min_margin"], 4) for p in golden["prompts"]],
              "distinct tokens", [len(set(p["greedy"]["tokens"])) for p in golden["prompts"]],
              flush=True)


if __name__ == "__main__":
    main()
