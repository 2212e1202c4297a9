#!/usr/bin/env python3
"""tools/demo.sh's client: sends one long prompt twice to a running `kvtier serve` and prints each
request's time to first token and where the second one's prompt KV came from.

A short unrelated warm-up request goes first, so the two measured requests differ only by the cache.

Python's standard library only (urllib). Each request is a streamed completion
(`"stream": true`); its time to first token is from sending the request to the first server-sent
event that carries text. Where the prompt's KV came from is read from the server's /metrics:
kvtier_serve_prompt_tokens_total{source="computed"|"engine"|"t0"|"t1"|"t2"}, taken before and
after each request (the demo is the server's only client, so the difference is that request's).
"""

import argparse
import json
import sys
import time
import urllib.request

SOURCES = ("computed", "engine", "t0", "t1", "t2")
SOURCE_NAMES = {
    "computed": "computed (no cache hit)",
    "engine": "the engine's private prefix cache",
    "t0": "kvtierd's T0, GPU memory",
    "t1": "kvtierd's T1, pinned host memory",
    "t2": "kvtierd's T2, NVMe",
}

# A paragraph that reads like the shared system prompt or document of a real deployment; repeated
# (numbered) up to the requested length.
PARAGRAPH = (
    "You are a careful assistant for the operations team of a storage company. Answer from the "
    "runbook below, cite the section you used, and say plainly when the runbook does not cover "
    "the question. Section {n}: when a disk in a storage node reports media errors, drain the "
    "node, replace the disk, let the rebuild finish, and only then return the node to service."
)


def prompt_of(words):
    parts, count, n = [], 0, 1
    while count < words:
        p = PARAGRAPH.format(n=n)
        parts.append(p)
        count += len(p.split())
        n += 1
    return " ".join(" ".join(parts).split()[:words]) + "\nQuestion: what does section 1 say?\n"


def scrape(url):
    """prompt tokens by source, from /metrics."""
    with urllib.request.urlopen(url + "/metrics", timeout=60) as r:
        text = r.read().decode()
    out = {s: 0.0 for s in SOURCES}
    for line in text.splitlines():
        for s in SOURCES:
            if line.startswith('kvtier_serve_prompt_tokens_total{source="%s"} ' % s):
                out[s] = float(line.split()[-1])
    return out


def stream(url, model, prompt, max_tokens):
    """One streamed completion: (seconds to the first text event, text, usage)."""
    body = json.dumps({
        "model": model, "prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
        "ignore_eos": True, "stream": True, "stream_options": {"include_usage": True},
    }).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    start = time.perf_counter()
    ttft, text, usage = None, [], None
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            event = json.loads(line[6:])
            if event.get("usage"):
                usage = event["usage"]
            for choice in event.get("choices", []):
                if choice.get("text"):
                    if ttft is None:
                        ttft = time.perf_counter() - start
                    text.append(choice["text"])
    if ttft is None:  # every token was a special one (skipped): the stream's end is the first
        ttft = time.perf_counter() - start
    return ttft, "".join(text), usage or {}


def split(before, after):
    return {s: int(round(after[s] - before[s])) for s in SOURCES}


def describe(tokens):
    total = sum(tokens.values())
    parts = ["%d %s" % (n, "computed" if s == "computed" else "from " + SOURCE_NAMES[s])
             for s, n in tokens.items() if n > 0]
    return "%d prompt tokens: %s" % (total, ", ".join(parts) if parts else "none")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--url", required=True, help="the server, e.g. http://127.0.0.1:8000")
    ap.add_argument("--model", required=True, help="the served model name")
    ap.add_argument("--prompt-words", type=int, default=600)
    ap.add_argument("--max-tokens", type=int, default=16)
    a = ap.parse_args()

    prompt = prompt_of(a.prompt_words)
    # A short unrelated request first, so that neither measured one pays for a cold server (the
    # weights' pages, first allocations): the two differ only by the cache.
    stream(a.url, a.model, "Warm-up.", 2)
    ttft, split_of = [], []
    for i in range(2):
        before = scrape(a.url)
        t, text, usage = stream(a.url, a.model, prompt, a.max_tokens)
        split_of.append(split(before, scrape(a.url)))
        ttft.append(t)
        print("request %d: TTFT %8.1f ms  (%s; usage.cached_tokens %s)" % (
            i + 1, t * 1000, describe(split_of[-1]),
            usage.get("prompt_tokens_details", {}).get("cached_tokens", "?")))
        if i == 0:
            print("           text: %s" % json.dumps(text[:120], ensure_ascii=False))
        sys.stdout.flush()

    cached = {s: n for s, n in split_of[1].items() if s != "computed" and n > 0}
    if not cached:
        print("second request served from: nowhere (its prompt was computed again)")
        return 1
    tier = max(cached, key=cached.get)
    print("second request served from: %s (%s), %d of its %d prompt tokens" % (
        tier.upper() if tier != "engine" else "engine", SOURCE_NAMES[tier], cached[tier],
        sum(split_of[1].values())))
    print("TTFT: %.1f ms without a hit, %.1f ms with it (%.1fx)" % (
        ttft[0] * 1000, ttft[1] * 1000, ttft[0] / max(ttft[1], 1e-9)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
