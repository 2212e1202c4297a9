// Block index lookup rate at scale (issue 2, section 3: >= 10 M lookups/s on one core at 10 M
// entries), next to the DRAM ceiling measured in the same run (docs/benchmarks.md).
//
// Fills an index with N random keys, then measures lookups of random present keys: single-key Find,
// batched LookupPrefix (64 keys per call) on one thread and on two. The ceiling is the rate of
// independent random 64-byte reads over an array as large as the index: what one cache miss per
// lookup would allow. A lookup takes two (its table slot, then its entry), so ~0.5 is the best
// ratio to expect; the goal is the absolute 10 M/s.
//
//   kvtier_index_bench [--entries N] [--seconds S]   (defaults: 10000000 entries, 2 s per case)
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "index/block_index.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kBatch = 64;

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Key number i, computed rather than stored, so a lookup reads nothing but the index.
BlockKey KeyNumber(uint64_t i) { return BlockKey{SplitMix(2 * i), SplitMix(2 * i + 1)}; }

struct Options {
  size_t entries = 10'000'000;
  double seconds = 2.0;
};

Options ParseArgs(int argc, char** argv) {
  Options options;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (std::strcmp(argv[i], "--entries") == 0) {
      options.entries = std::strtoull(argv[i + 1], nullptr, 10);
    } else if (std::strcmp(argv[i], "--seconds") == 0) {
      options.seconds = std::strtod(argv[i + 1], nullptr);
    } else {
      std::fprintf(stderr, "usage: %s [--entries N] [--seconds S]\n", argv[0]);
      std::exit(2);
    }
  }
  if (options.entries == 0 || options.seconds <= 0) {
    std::fprintf(stderr, "--entries and --seconds must be positive\n");
    std::exit(2);
  }
  return options;
}

// Runs `step` (which takes a random state and returns the operations it did) until `seconds` have
// passed, on `threads` threads at once; returns operations per second over all threads.
template <typename Step>
double Rate(int threads, double seconds, const Step& step) {
  std::vector<uint64_t> done(threads);
  std::vector<std::thread> pool;
  const Clock::time_point start = Clock::now();
  const auto deadline = start + std::chrono::duration<double>(seconds);
  for (int t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      uint64_t rng = SplitMix(1000 + t);
      uint64_t ops = 0;
      while (Clock::now() < deadline) {
        for (int r = 0; r < 16; ++r) ops += step(rng);
      }
      done[t] = ops;
    });
  }
  for (std::thread& thread : pool) thread.join();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  uint64_t total = 0;
  for (uint64_t ops : done) total += ops;
  return static_cast<double>(total) / elapsed;
}

uint64_t Next(uint64_t& rng) { return rng = SplitMix(rng); }

// Fails the benchmark loudly (a miss on a present key means it measured something else).
void Check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "index_bench: %s\n", what);
    std::exit(1);
  }
}

// An array of words on transparent huge pages where available, filled with ones.
class HugeArray {
 public:
  explicit HugeArray(size_t words) : size_(words), bytes_(words * sizeof(uint64_t)) {
    void* data = mmap(nullptr, bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    Check(data != MAP_FAILED, "cannot map the ceiling array");
    (void)madvise(data, bytes_, MADV_HUGEPAGE);
    data_ = static_cast<uint64_t*>(data);
    std::fill(data_, data_ + size_, uint64_t{1});
  }
  ~HugeArray() { munmap(data_, bytes_); }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  size_t size() const { return size_; }
  uint64_t operator[](size_t i) const { return data_[i]; }

 private:
  uint64_t* data_ = nullptr;
  size_t size_;
  size_t bytes_;
};

// The ceiling: independent random 64-byte line reads over `array`; returns reads/s.
double LineReadCeiling(const HugeArray& array, int threads, double seconds) {
  const size_t lines = array.size() / 8;
  volatile uint64_t sink = 0;
  const double rate = Rate(threads, seconds, [&](uint64_t& rng) {
    uint64_t sum = 0;
    for (int i = 0; i < 1024; ++i) sum += array[(Next(rng) % lines) * 8];
    sink = sink + sum;
    return uint64_t{1024};
  });
  return rate;
}

struct Row {
  const char* name;
  int threads;
  double rate;
};

int Main(int argc, char** argv) {
  const Options options = ParseArgs(argc, argv);
  // Debian builds abseil without NDEBUG, which leaves absl::Mutex deadlock detection on: a global
  // lock-order graph updated on every lock, several times the cost of the lock itself. kvtierd and
  // `kvtier replay` turn it off at start-up; so does this benchmark.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  std::unique_ptr<BlockIndex> index = std::move(BlockIndex::Create({})).value();
  const Clock::time_point fill_start = Clock::now();
  for (uint64_t i = 0; i < options.entries; ++i) {
    Check(index->Insert(KeyNumber(i), NewBlock{.slot = static_cast<uint32_t>(i)})->inserted,
          "duplicate key in fill");
  }
  const double fill_rate =
      options.entries / std::chrono::duration<double>(Clock::now() - fill_start).count();
  const size_t bytes = index->MemoryBytes();

  // The ceiling array: as large as the index, on huge pages where the index gets them too (it asks
  // for transparent huge pages), touched so every page is real.
  HugeArray array(bytes / sizeof(uint64_t));
  const double ceiling1 = LineReadCeiling(array, 1, options.seconds);
  const double ceiling2 = LineReadCeiling(array, 2, options.seconds);

  const size_t n = options.entries;
  std::vector<Row> rows;
  rows.push_back({"Find", 1, Rate(1, options.seconds, [&](uint64_t& rng) {
                    uint64_t found = 0;
                    for (int i = 0; i < 256; ++i)
                      found += index->Find(KeyNumber(Next(rng) % n)).has_value();
                    Check(found == 256, "Find missed a present key");
                    return found;
                  })});
  auto batched = [&](uint64_t& rng) {
    BlockKey keys[kBatch];
    TierMask tiers[kBatch];
    for (BlockKey& key : keys) key = KeyNumber(Next(rng) % n);
    const size_t hits = index->LookupPrefix(keys, tiers);
    Check(hits == kBatch, "LookupPrefix missed a present key");
    return uint64_t{hits};
  };
  rows.push_back({"LookupPrefix x64", 1, Rate(1, options.seconds, batched)});
  rows.push_back({"LookupPrefix x64", 2, Rate(2, options.seconds, batched)});

  std::printf("block index: %zu entries, %.1f MiB (%.1f B/entry), filled at %.2f M inserts/s\n", n,
              bytes / 1048576.0, static_cast<double>(bytes) / n, fill_rate / 1e6);
  std::printf(
      "ceiling: independent random 64 B reads over %.1f MiB: %.1f M/s (1 thread), %.1f M/s (2)\n",
      bytes / 1048576.0, ceiling1 / 1e6, ceiling2 / 1e6);
  std::printf("%-18s %7s %12s %14s %8s %11s\n", "case", "threads", "lookups M/s", "ceiling M/s",
              "ratio", "goal M/s");
  for (const Row& row : rows) {
    const double ceiling = row.threads == 1 ? ceiling1 : ceiling2;
    std::printf("%-18s %7d %12.2f %14.1f %8.3f %11.0f\n", row.name, row.threads, row.rate / 1e6,
                ceiling / 1e6, row.rate / ceiling, 10.0 * row.threads);
  }
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) { return kvtier::Main(argc, argv); }
