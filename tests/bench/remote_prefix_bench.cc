// Time to first byte of a remote prefix hit through kvtierd (docs/benchmarks.md "Remote tier:
// a prefix hit through kvtierd"), next to the bound of its bytes at the store's own read rate
// measured in the same run on the same server.
//
//   kvtier_remote_prefix_bench [--blocks 16] [--block-mib 2] [--repeat 5]
//
// It starts a redis-server (persistence off) and one kvtierd with T3 on it (T1 only locally, so
// every block of the prefix comes from the store), writes each prefix straight into the store as
// another daemon of the fleet would (the daemon keys under a shared key-scope secret), then, per
// repetition, on a fresh prefix:
//   ttfb   lookup + get of the prefix's first block (leased in T1: the first byte an engine can
//          read), from the lookup's start;
//   whole  lookup + get of every block of another fresh prefix;
// and two ceilings of the store's read rate on this machine, with no daemon in between:
// `redis-benchmark -t set,get -d <block bytes> -P 1 -c <remote.threads = 4>` (the daemon reads
// with one GET per block on 4 worker threads), and RemoteStore::Get of a whole prefix from 4
// threads of this process at once, each getting a quarter of the blocks one at a time (the
// daemon's access pattern without the daemon: once the store's client costs less CPU per byte
// than redis-benchmark, on a small machine this is the higher one). bound = bytes / the higher
// ceiling (the RemoteStore one sampled three times per repetition: a ceiling is a best case). Each
// figure is the best of --repeat (shared, noisy machines: the ratio holds, the absolute number does
// not). A ratio below 0.95 is impossible (faster than the store can send: the ceiling's runs were
// disturbed) and the bench says so and exits 3; one in [0.95, 1) is at the ceiling, within its
// noise.
#include <sys/stat.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "client/kvtier_client.h"
#include "common/checksum.h"
#include "daemon/key_scope.h"
#include "index/namespace.h"
#include "tests/daemon/kvtierd_process.h"
#include "tests/tiers/remote/redis_test_util.h"
#include "tiers/remote/remote_store.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

// The daemon's remote.threads (its default): the parallelism of the store-side ceilings.
constexpr size_t kReaders = 4;

struct Args {
  uint32_t blocks = 16;
  uint32_t block_mib = 2;
  int repeat = 5;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const int v = std::max(1, std::atoi(argv[i + 1]));
    if (k == "--blocks") a.blocks = static_cast<uint32_t>(v);
    if (k == "--block-mib") a.block_mib = static_cast<uint32_t>(v);
    if (k == "--repeat") a.repeat = v;
  }
  return a;
}

// GET rate of `redis-benchmark -t set,get` (bytes per second), 0 when it failed.
double RedisBenchmarkGetRate(uint16_t port, size_t bytes, int clients) {
  const std::string command = "redis-benchmark -h 127.0.0.1 -p " + std::to_string(port) +
                              " -t set,get -d " + std::to_string(bytes) + " -P 1 -c " +
                              std::to_string(clients) + " -n 400 -r 64 --csv 2>/dev/null";
  FILE* pipe = ::popen(command.c_str(), "r");
  if (pipe == nullptr) return 0;
  char line[512];
  double rate = 0;
  while (std::fgets(line, sizeof(line), pipe) != nullptr) {
    double rps = 0;
    if (std::sscanf(line, "\"GET\",\"%lf\"", &rps) == 1) rate = rps * static_cast<double>(bytes);
  }
  return ::pclose(pipe) == 0 ? rate : 0;
}

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

class Bench {
 public:
  Bench(const Args& args, const std::string& secret, const RemoteStoreOptions& store)
      : args_(args), bytes_(size_t{args.block_mib} << 20), payload_(bytes_) {
    scope_ = *KeyScope::Load(secret, true);
    ns_.model_id = "remote-prefix-bench";
    ns_.block_tokens = 16;
    store_ = std::move(*RemoteStore::Open(store));
    std::mt19937_64 rng(1);
    for (size_t i = 0; i < payload_.size(); i += 8) {
      const uint64_t w = rng();
      std::memcpy(payload_.data() + i, &w, std::min<size_t>(8, payload_.size() - i));
    }
  }

  // Client keys of a fresh prefix, stored in the store under their daemon keys.
  std::vector<BlockKey> StorePrefix(client::Client& c) {
    std::vector<uint32_t> tokens(size_t{args_.blocks} * ns_.block_tokens);
    for (uint32_t& t : tokens) t = next_token_++;
    std::vector<BlockKey> keys = *c.KeysFor(tokens);
    const BlockKey root = NamespaceRoot(ns_);
    std::vector<RemotePutItem> items(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      items[i].record =
          BlockRecord{scope_.Scope(root, keys[i]), root.lo, static_cast<uint32_t>(bytes_),
                      PayloadChecksum(payload_.data(), bytes_)};
      items[i].payload = payload_.data();
    }
    if (absl::Status s = store_->Put(absl::MakeSpan(items)); !s.ok()) {
      std::fprintf(stderr, "put: %s\n", std::string(s.message()).c_str());
      std::exit(1);
    }
    return keys;
  }

  // Lookup + get of the first `n` blocks of `keys`: seconds, or -1 when not all came whole.
  double LookupAndGet(client::Client& c, const std::vector<BlockKey>& keys, size_t n) {
    const auto start = Clock::now();
    auto looked = c.Lookup(keys);
    if (!looked.ok() || looked->hit_blocks != keys.size()) return -1;
    const std::vector<BlockKey> first(keys.begin(), keys.begin() + static_cast<ptrdiff_t>(n));
    auto got = c.Get(first);
    const double took = Seconds(start);
    bool whole = got.ok();
    for (size_t i = 0; whole && i < n; ++i) {
      whole = (*got)[i].code == 0 && (*got)[i].payload_bytes == bytes_ &&
              std::memcmp(c.SlotData((*got)[i].slot), payload_.data(), bytes_) == 0;
    }
    if (got.ok()) (void)c.Release(first);
    return whole ? took : -1;
  }

  // The store's own rate with the daemon's access pattern and no daemon, bytes per second: the
  // best of `samples` reads of one whole prefix, each by kReaders threads at once, each thread a
  // Get of one block at a time over its share (its own pooled connection). (Deeper pipelines are
  // slower here: the server then holds a pipeline's worth of 2 MiB replies per connection.)
  double StoreRate(client::Client& c, int samples) {
    const std::vector<BlockKey> keys = StorePrefix(c);
    const BlockKey root = NamespaceRoot(ns_);
    std::vector<std::vector<std::byte>> dst(keys.size(), std::vector<std::byte>(bytes_));
    std::vector<RemoteGetItem> items(keys.size());
    for (size_t i = 0; i < keys.size(); ++i) {
      items[i].key = scope_.Scope(root, keys[i]);
      items[i].namespace_id = root.lo;
      items[i].dst = dst[i].data();
      items[i].dst_bytes = static_cast<uint32_t>(bytes_);
    }
    double best = 0;
    for (int s = 0; s < samples; ++s) {
      const double took = ReadInParallel(items);
      if (took > 0) best = std::max(best, static_cast<double>(bytes_ * keys.size()) / took);
    }
    return best;
  }

  // Seconds for kReaders threads to get every item (each a share, one block at a time); -1 when
  // one was not a hit.
  double ReadInParallel(std::vector<RemoteGetItem>& items) {
    const size_t share = (items.size() + kReaders - 1) / kReaders;
    std::atomic<bool> ok{true};
    const auto start = Clock::now();
    std::vector<std::thread> readers;
    for (size_t at = 0; at < items.size(); at += share) {
      readers.emplace_back([&, at] {
        for (size_t i = at; i < std::min(at + share, items.size()); ++i) {
          if (!store_->Get(absl::MakeSpan(&items[i], 1)).ok()) ok = false;
        }
      });
    }
    for (std::thread& t : readers) t.join();
    const double took = Seconds(start);
    for (const RemoteGetItem& item : items) ok = ok && item.outcome == RemoteOutcome::kHit;
    return ok ? took : -1;
  }

  const Namespace& ns() const { return ns_; }
  size_t prefix_bytes() const { return bytes_ * args_.blocks; }

 private:
  const Args args_;
  const size_t bytes_;
  std::vector<std::byte> payload_;
  KeyScope scope_{KeyScope::Secret{}};
  Namespace ns_;
  std::unique_ptr<RemoteStore> store_;
  uint32_t next_token_ = 1;
};

int Main(int argc, char** argv) {
  const Args args = Parse(argc, argv);
  if (const std::string skip = testing::RedisSkipReason(); !skip.empty()) {
    std::fprintf(stderr, "%s\n", skip.c_str());
    return 1;
  }
  testing::RedisTempDir redis_dir;
  auto server = testing::RedisServer::Start(redis_dir.path(), {"maxmemory 4gb"});
  if (!server.ok())
    return std::fprintf(stderr, "redis: %s\n", server.status().ToString().c_str()), 1;
  testing::TempDir dir;
  const std::string secret = dir.Write("fleet.secret", std::string(KeyScope::kSecretBytes, 's'));
  ::chmod(secret.c_str(), 0600);  // as docs/configuration.md asks of a fleet's secret
  const uint64_t t1_bytes = uint64_t{args.blocks} * args.block_mib * 4 << 20;
  auto daemon = testing::KvtierdProcess::Start(dir.path(), {"--t1.capacity_bytes",
                                                            std::to_string(t1_bytes),
                                                            "--t1.slot_bytes",
                                                            std::to_string(args.block_mib) + "MiB",
                                                            "--t1.dma_chunk_bytes",
                                                            std::to_string(t1_bytes),
                                                            "--t1.huge_pages",
                                                            "off",
                                                            "--t2.enabled",
                                                            "false",
                                                            "--daemon.key_scope_file",
                                                            secret,
                                                            "--remote.enabled",
                                                            "true",
                                                            "--remote.nodes",
                                                            (*server)->address(),
                                                            "--remote.cluster",
                                                            "false",
                                                            "--remote.lookup_budget_us",
                                                            "100000"});
  if (!daemon.ok()) return std::fprintf(stderr, "%s\n", daemon.status().ToString().c_str()), 1;
  RemoteStoreOptions store;
  store.nodes = {(*server)->address()};
  store.max_pipeline = args.blocks;
  Bench bench(args, secret, store);
  client::ClientOptions client_options;
  client_options.socket_path = (*daemon)->socket_path();
  client_options.ns = bench.ns();
  client_options.client_name = "bench";
  auto c = client::Client::Connect(client_options);
  if (!c.ok()) return std::fprintf(stderr, "%s\n", c.status().ToString().c_str()), 1;
  double ttfb = 1e9, whole = 1e9, rate = 0, benchmark = 0;
  const size_t block_bytes = size_t{args.block_mib} << 20;
  for (int r = 0; r < args.repeat; ++r) {
    benchmark = std::max(benchmark, RedisBenchmarkGetRate((*server)->port(), block_bytes, 4));
    const double one = bench.LookupAndGet(**c, bench.StorePrefix(**c), 1);
    const double all = bench.LookupAndGet(**c, bench.StorePrefix(**c), args.blocks);
    if (one < 0 || all < 0) return std::fprintf(stderr, "a block did not come back whole\n"), 1;
    ttfb = std::min(ttfb, one);
    whole = std::min(whole, all);
    // A ceiling is a best case: three samples of it to each one of the figures.
    rate = std::max(rate, bench.StoreRate(**c, 3));
  }
  const double ceiling = std::max(rate, benchmark);
  const double block_bound = static_cast<double>(block_bytes) / ceiling;
  const double prefix_bound = static_cast<double>(bench.prefix_bytes()) / ceiling;
  std::printf("remote prefix hit through kvtierd: %u blocks of %u MiB (%.0f MiB), best of %d\n",
              args.blocks, args.block_mib, static_cast<double>(bench.prefix_bytes()) / (1 << 20),
              args.repeat);
  std::printf(
      "  ceilings: redis-benchmark GET -P 1 -c 4 %.2f GB/s; RemoteStore, the prefix by 4 threads "
      "(a Get per block) %.2f GB/s\n",
      benchmark / 1e9, rate / 1e9);
  std::printf("  first block:  %.2f ms   bound (1 block / ceiling) %.2f ms   ratio %.2f\n",
              ttfb * 1e3, block_bound * 1e3, ttfb / block_bound);
  std::printf("  whole prefix: %.2f ms   bound (prefix / ceiling) %.2f ms   ratio %.2f\n",
              whole * 1e3, prefix_bound * 1e3, whole / prefix_bound);
  (*daemon)->Stop(SIGTERM);
  // The ceiling is itself measured (best of --repeat), so a figure may land a little past it by
  // noise alone; past kCeilingNoise it is impossible: the ceiling's own runs were disturbed.
  constexpr double kCeilingNoise = 0.05;
  const double fastest = std::min(ttfb / block_bound, whole / prefix_bound);
  if (fastest < 1 - kCeilingNoise) {
    std::printf(
        "  NOT A MEASUREMENT: more than %.0f%% faster than this run's ceiling, so the ceiling's "
        "own runs were disturbed (a loaded machine); run again on a quieter one\n",
        kCeilingNoise * 100);
    return 3;
  }
  if (fastest < 1) {
    std::printf(
        "  at the ceiling: a ratio in [%.2f, 1) is within the noise of the ceiling's own "
        "measurement\n",
        1 - kCeilingNoise);
  }
  return 0;
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) { return kvtier::Main(argc, argv); }
