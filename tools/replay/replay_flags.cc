// The flag declarations of `kvtier replay` (its --help). Values are checked by replay_plan.cc.
#include <fmt/format.h>

#include <CLI/CLI.hpp>

#include "tools/replay/replay_plan.h"

namespace kvtier::replay {

void AddReplayFlags(CLI::App& sub, ReplayFlags* f) {
  sub.add_option("--trace", f->trace, "Trace file (JSONL; gzip/zstd read directly), or - for stdin")
      ->option_text("FILE|-");
  sub.add_option("--format", f->format, "Trace format: auto, mooncake, bailian")
      ->option_text("FMT (auto)");
  sub.add_flag("--skip-bad", f->skip_bad, "Skip and count malformed lines instead of stopping");
  sub.add_option("--block-tokens", f->block_tokens,
                 "Tokens per block (default: 512 for Mooncake, 16 for Bailian)")
      ->option_text("N");
  sub.add_option("--policy", f->policy,
                 fmt::format("Eviction policy: {}, opt (Belady with bypass; one tier only)",
                             EvictionPolicyNames()))
      ->option_text("P (lru)");
  sub.add_option("--admission", f->admission,
                 fmt::format("Admission filter: {}", AdmissionPolicyNames()))
      ->option_text("A (all)");
  sub.add_option(
         "--admission-window", f->admission_window,
         "Blocks the 'second' filter remembers (default: the tier's capacity; TinyLFU-style "
         "filters use several times the capacity)")
      ->option_text("N");
  sub.add_flag("--leaf-first", f->leaf_first,
               "Prefix-aware: evict only blocks with no resident child");
  sub.add_option("--capacity-blocks", f->capacity_blocks, "One tier of N blocks")->option_text("N");
  sub.add_option("--capacity-bytes", f->capacity_bytes,
                 "One tier of SIZE bytes (10GiB, 512MB, ...; needs --model or --block-bytes)")
      ->option_text("SIZE");
  sub.add_option("--tier", f->tiers,
                 "A tier, top first; repeat for a stack. SPEC = name=T1,capacity=10GiB|20000|5%,"
                 "policy=s3fifo,admission=second,leaf_first,read_gbps=50 (omitted keys take "
                 "--policy/--admission/--leaf-first/--read-gbps); a remote tier adds "
                 "latency_us=300 (per request reading it) and climb_to=T1 (its reads enter T1 "
                 "first, as kvtierd's T3)")
      ->option_text("SPEC")
      ->allow_extra_args(false);
  sub.add_option("--put-tier", f->put_tier,
                 "The tier new blocks are born in, as the daemon's puts go to T1 (default: the "
                 "first tier)")
      ->option_text("NAME");
  sub.add_option("--read-tier", f->read_tier,
                 "The tier reads copy blocks into, as a client's Gets name it (default: the first "
                 "tier; T0 for an engine reading from GPU memory)")
      ->option_text("NAME");
  sub.add_option("--model", f->model,
                 "Model shape for KV bytes per block: a Hugging Face config.json "
                 "(configs/models/NAME.json) or a model directory holding one")
      ->option_text("PATH");
  sub.add_option("--block-bytes", f->block_bytes, "KV bytes per block (instead of --model)")
      ->option_text("B");
  sub.add_option("--compare", f->compare,
                 "Run each policy on the same tiers and print them side by side, e.g. "
                 "lru,fifo,sieve,s3fifo,arc,opt")
      ->option_text("P,P,...");
  sub.add_flag("--json", f->json, "Print one JSON object instead of a table");
  sub.add_flag("--sweep", f->sweep,
               "Miss-ratio curves: one tier at each capacity x policy (--compare, default all "
               "incl. opt) x admission; writes PREFIX.csv and PREFIX.png");
  sub.add_option("--sweep-out", f->sweep_out, "Output prefix of --sweep")
      ->option_text("PREFIX (sweep)");
  sub.add_option("--sweep-capacities", f->sweep_capacities,
                 "Capacities of --sweep (blocks, sizes or percentages; default 12 points, 1%..100% "
                 "of unique blocks, geometric)")
      ->option_text("C,C,...");
  sub.add_option("--sweep-admissions", f->sweep_admissions,
                 "Admission filters of --sweep (default --admission)")
      ->option_text("A,A,...");
  sub.add_option("--threads", f->threads, "Threads for --sweep (default: all cores)")
      ->option_text("N");
  sub.add_option("--prefill-tokens-per-s", f->prefill_tokens_per_s,
                 "Cost model: prefill throughput. Default 10000: a dense ~8B model on one H100 at "
                 "long prompts (DESIGN.md: recompute ~10x the ~20 ms load of 8K tokens, i.e. "
                 "<= 40k tokens/s at 8K, less at the 7K-27K-token Mooncake prompts)")
      ->option_text("R (10000)");
  sub.add_option(
         "--read-gbps", f->read_gbps,
         "Cost model: read GB/s into HBM per tier, top first. Default 3000,50,1.7 (DESIGN.md "
         "ceilings: HBM copy, pinned host->HBM, io_uring disk)")
      ->option_text("G,G,...");
}

}  // namespace kvtier::replay
