// Trace replay throughput: block references per second for LRU on one core, parsing included
// (issue 2 goal: >= 20 M refs/s), printed next to ceilings measured in the same run: a raw pass
// over the file's bytes in memory, parsing alone, and simulating alone.
//
// Usage: kvtier_replay_bench [--refs N (50000000)] [--capacity-fraction F (0.05)] [--path FILE]
//                            [--keep] [--trace FILE] [--repeat N (3)]
// --trace measures an existing trace instead of generating one. Each path is timed --repeat times
// and the fastest run is reported (the machines are shared and noisy).
// The trace is synthetic, prefix-chained and Mooncake-formatted: multi-turn conversations (each
// turn resends the history and adds new blocks) behind a few shared system prompts.
#include <fmt/format.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tools/replay/simulator.h"
#include "tools/replay/trace_reader.h"

namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

struct Options {
  uint64_t refs = 50'000'000;
  double capacity_fraction = 0.05;
  std::string path;
  bool keep = false;
  std::string trace;  // an existing trace: no generation
  int repeat = 3;
};

// Writes about `target_refs` block references; returns the exact number written.
uint64_t WriteTrace(const std::string& path, uint64_t target_refs) {
  std::mt19937_64 rng(42);
  constexpr int kPrompts = 16, kPromptBlocks = 4, kSessions = 50000, kMaxBlocks = 64;
  uint64_t next_id = 0;
  std::vector<std::vector<uint64_t>> prompts(kPrompts);
  for (auto& p : prompts) {
    for (int b = 0; b < kPromptBlocks; ++b) p.push_back(next_id++);
  }
  std::vector<std::vector<uint64_t>> sessions(kSessions);
  std::FILE* f = std::fopen(path.c_str(), "w");
  if (f == nullptr) {
    std::perror(path.c_str());
    std::exit(1);
  }
  std::string buf;
  uint64_t refs = 0, t = 0;
  while (refs < target_refs) {
    auto& s = sessions[rng() % kSessions];
    if (s.empty() || s.size() > kMaxBlocks) s = prompts[rng() % kPrompts];  // a new conversation
    for (uint64_t n = 1 + rng() % 12; n > 0; --n) s.push_back(next_id++);   // this turn's blocks
    fmt::format_to(
        std::back_inserter(buf),
        R"({{"timestamp": {}, "input_length": {}, "output_length": 100, "hash_ids": [{}]}})"
        "\n",
        t++ / 4, s.size() * 512 - 100, fmt::join(s, ", "));
    refs += s.size();
    if (buf.size() > (1 << 22)) {
      std::fwrite(buf.data(), 1, buf.size(), f);
      buf.clear();
    }
  }
  std::fwrite(buf.data(), 1, buf.size(), f);
  std::fclose(f);
  return refs;
}

// The memory ceiling: one pass over the file's bytes already in memory (counting newlines).
double RawPassSeconds(const std::string& path, uint64_t* bytes) {
  std::ifstream in(path, std::ios::binary);
  std::string data((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  *bytes = data.size();
  const auto start = Clock::now();
  uint64_t lines = 0;
  for (const char* p = data.data();
       (p = static_cast<const char*>(std::memchr(p, '\n', data.data() + data.size() - p))) !=
       nullptr;
       ++p) {
    ++lines;
  }
  const double s = Seconds(start);
  if (lines == 0) std::fprintf(stderr, "empty trace\n");
  return s;
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    const bool has_value = i + 1 < argc;
    if (a == "--refs" && has_value) {
      o.refs = std::strtoull(argv[++i], nullptr, 10);
    } else if (a == "--capacity-fraction" && has_value) {
      o.capacity_fraction = std::strtod(argv[++i], nullptr);
    } else if (a == "--path" && has_value) {
      o.path = argv[++i];
    } else if (a == "--trace" && has_value) {
      o.trace = argv[++i];
    } else if (a == "--repeat" && has_value) {
      o.repeat = std::max(1, std::atoi(argv[++i]));
    } else if (a == "--keep") {
      o.keep = true;
    } else {
      std::fprintf(stderr,
                   "usage: %s [--refs N] [--capacity-fraction F] [--path FILE] [--keep] "
                   "[--trace FILE] [--repeat N]\n",
                   argv[0]);
      std::exit(2);
    }
  }
  if (o.path.empty()) {
    o.path = (std::filesystem::temp_directory_path() / "kvtier_replay_bench.jsonl").string();
  }
  return o;
}

}  // namespace

// Runs `f` `repeat` times; returns the fastest time in seconds.
template <typename F>
double Fastest(int repeat, F&& f) {
  double best = 1e300;
  for (int i = 0; i < repeat; ++i) {
    const auto start = Clock::now();
    f();
    best = std::min(best, Seconds(start));
  }
  return best;
}

int main(int argc, char** argv) {
  using namespace kvtier::replay;
  Options o = ParseArgs(argc, argv);
  if (!o.trace.empty()) {
    o.path = o.trace;
    o.keep = true;
  } else {
    const auto start = Clock::now();
    const uint64_t refs = WriteTrace(o.path, o.refs);
    std::printf("generated %s: %.1f M refs in %.1f s\n", o.path.c_str(), refs / 1e6,
                Seconds(start));
  }
  uint64_t bytes = 0;
  double raw_s = 1e300;
  for (int i = 0; i < o.repeat; ++i) raw_s = std::min(raw_s, RawPassSeconds(o.path, &bytes));

  absl::StatusOr<Trace> trace;
  const double load_s = Fastest(o.repeat, [&] { trace = LoadTrace(o.path, TraceLoadOptions{}); });
  if (!trace.ok()) {
    std::fprintf(stderr, "%s\n", std::string(trace.status().message()).c_str());
    return 1;
  }
  TierConfig tier;
  tier.eviction.policy = "lru";
  tier.capacity_blocks = std::max<uint64_t>(1, uint64_t(o.capacity_fraction * trace->num_blocks()));
  absl::StatusOr<SimResult> result;
  const double sim_s = Fastest(o.repeat, [&] { result = Simulate(*trace, {tier}, SimOptions{}); });
  if (!result.ok()) return 1;
  const double n = double(trace->num_refs());
  std::printf(
      "trace: %.2f M requests, %.1f M refs, %.2f M unique blocks, %.0f MiB (%.1f bytes/ref); "
      "LRU at %.0f%% = %llu blocks: prefix hit ratio %.4f\n",
      trace->num_requests() / 1e6, n / 1e6, trace->num_blocks() / 1e6, bytes / 1048576.0, bytes / n,
      o.capacity_fraction * 100, (unsigned long long)tier.capacity_blocks,
      result->PrefixHitRatio());
  std::printf("%-34s %10s %14s\n", "path (one core)", "seconds", "M refs/s");
  std::printf("%-34s %10.3f %14.1f   (%.1f GB/s)\n", "ceiling: raw memory pass (memchr)", raw_s,
              n / raw_s / 1e6, bytes / raw_s / 1e9);
  std::printf("%-34s %10.3f %14.1f   (%.2f GB/s)\n", "ceiling: load + parse only", load_s,
              n / load_s / 1e6, bytes / load_s / 1e9);
  std::printf("%-34s %10.3f %14.1f\n", "simulate LRU only", sim_s, n / sim_s / 1e6);
  std::printf("%-34s %10.3f %14.1f   goal >= 20.0\n", "end to end: load + parse + LRU",
              load_s + sim_s, n / (load_s + sim_s) / 1e6);
  if (!o.keep) std::filesystem::remove(o.path);
  return 0;
}
