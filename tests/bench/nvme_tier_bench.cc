// T2 NVMe tier throughput and warm-restart rate (issue 3, "Benchmarks"), next to the ceiling
// measured in the same run: raw O_DIRECT io_uring reads and writes of the same file system at the
// same sizes and queue depth, with fixed buffers, without the tier (docs/benchmarks.md).
//
// For each payload size: raw write, raw read (shuffled), then the tier's Write and Read (shuffled)
// from 1 thread and from N threads, all with `queue_depth` I/Os in flight in total, from a
// registered ("T1") buffer pool. Then a warm restart over `records` metadata records: the first
// NvmeTier::Open after the writer closed the database (a restart after a clean shutdown), then the
// RocksDB scan alone (ceiling).
//
//   kvtier_nvme_tier_bench [--dir D] [--mib-per-case M] [--threads N] [--queue-depth Q]
//                          [--records R] [--repeat K]   (defaults: /var/tmp, 384, 4, 64, 1000000,
//                          2)
//
// Both files get one untimed write pass first (so no figure pays for first-touch extent
// conversion), and every figure is the best of K passes: the machines are shared and noisy.
#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <unistd.h>
#include <xxhash.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <mutex>
#include <numeric>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "tiers/nvme_metadata.h"
#include "tiers/nvme_tier.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;

struct Args {
  std::string dir = "/var/tmp";
  uint64_t mib_per_case = 384;
  uint32_t threads = 4;
  uint32_t queue_depth = 64;
  uint64_t records = 1000000;
  int repeat = 2;
};

Args Parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string k = argv[i];
    const char* v = argv[i + 1];
    if (k == "--dir")
      a.dir = v;
    else if (k == "--mib-per-case")
      a.mib_per_case = std::strtoull(v, nullptr, 10);
    else if (k == "--threads")
      a.threads = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    else if (k == "--queue-depth")
      a.queue_depth = static_cast<uint32_t>(std::strtoul(v, nullptr, 10));
    else if (k == "--records")
      a.records = std::strtoull(v, nullptr, 10);
    else if (k == "--repeat")
      a.repeat = std::atoi(v);
    else {
      std::fprintf(stderr, "unknown flag %s (see the file header)\n", k.c_str());
      std::exit(2);
    }
  }
  if (a.threads == 0 || a.queue_depth < a.threads || a.repeat < 1) {
    std::fprintf(stderr, "need 1 <= threads <= queue-depth and repeat >= 1\n");
    std::exit(2);
  }
  return a;
}

void Die(const std::string& what) {
  std::fprintf(stderr, "nvme_tier_bench: %s\n", what.c_str());
  std::exit(1);
}

// User + system CPU seconds of this process so far (all threads).
double CpuSeconds() {
  rusage u;
  ::getrusage(RUSAGE_SELF, &u);
  return u.ru_utime.tv_sec + u.ru_stime.tv_sec + (u.ru_utime.tv_usec + u.ru_stime.tv_usec) / 1e6;
}

double Seconds(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Raw ceiling: one io_uring, `depth` fixed buffers, `depth` I/Os in flight, block i at i * size.
double RawGbps(int fd, uint8_t* pool, uint32_t size, uint32_t depth,
               const std::vector<uint32_t>& order, bool write) {
  io_uring ring;
  if (io_uring_queue_init(depth, &ring, 0) != 0) Die("io_uring_queue_init");
  iovec iov{pool, size_t{size} * depth};
  if (io_uring_register_buffers(&ring, &iov, 1) != 0) Die("io_uring_register_buffers");
  const auto start = Clock::now();
  size_t next = 0, done = 0;
  std::vector<uint32_t> free_bufs(depth);
  std::iota(free_bufs.begin(), free_bufs.end(), 0);
  while (done < order.size()) {
    while (next < order.size() && !free_bufs.empty()) {
      const uint32_t b = free_bufs.back();
      free_bufs.pop_back();
      io_uring_sqe* sqe = io_uring_get_sqe(&ring);
      uint8_t* buf = pool + size_t{b} * size;
      const uint64_t off = uint64_t{order[next++]} * size;
      if (write)
        io_uring_prep_write_fixed(sqe, fd, buf, size, off, 0);
      else
        io_uring_prep_read_fixed(sqe, fd, buf, size, off, 0);
      io_uring_sqe_set_data64(sqe, b);
    }
    io_uring_submit_and_wait(&ring, 1);
    io_uring_cqe* cqe;
    unsigned head, seen = 0;
    io_uring_for_each_cqe(&ring, head, cqe) {
      if (cqe->res != static_cast<int>(size)) Die("raw I/O failed");
      free_bufs.push_back(static_cast<uint32_t>(io_uring_cqe_get_data64(cqe)));
      ++seen;
    }
    io_uring_cq_advance(&ring, seen);
    done += seen;
  }
  const double s = Seconds(start);
  io_uring_queue_exit(&ring);
  return double(size) * order.size() / s / 1e9;
}

// One thread's share of a tier run: its own buffers (inside the registered pool) and in-flight cap.
class Worker {
 public:
  Worker(uint8_t* bufs, uint32_t count, uint32_t size) : bufs_(bufs), size_(size) {
    for (uint32_t b = 0; b < count; ++b) {
      free_.push_back(b);
      sums_.push_back(XXH3_64bits(bufs + size_t{b} * size, size));
    }
  }
  void Run(NvmeTier& tier, const std::vector<SlotId>& slots, const std::vector<uint32_t>& blocks,
           bool write) {
    for (uint32_t i : blocks) {
      const uint32_t b = Take();
      uint8_t* buf = bufs_ + size_t{b} * size_;
      auto done = [this, b](absl::Status s) {
        if (!s.ok()) Die("tier I/O: " + s.ToString());
        Give(b);
      };
      if (write) {
        tier.Write(slots[i], BlockRecord{BlockKey{i, 1}, 1, size_, sums_[b]}, buf, done);
      } else {
        tier.Read(slots[i], buf, done);
      }
    }
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return free_.size() == sums_.size(); });
  }

 private:
  uint32_t Take() {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !free_.empty(); });
    const uint32_t b = free_.back();
    free_.pop_back();
    return b;
  }
  void Give(uint32_t b) {
    std::lock_guard<std::mutex> lock(mu_);
    free_.push_back(b);
    cv_.notify_all();
  }
  uint8_t* const bufs_;
  const uint32_t size_;
  std::vector<uint64_t> sums_;  // checksum of each buffer's (fixed) contents
  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<uint32_t> free_;
};

double TierGbps(NvmeTier& tier, uint8_t* pool, uint32_t size, uint32_t depth, uint32_t threads,
                const std::vector<SlotId>& slots, const std::vector<uint32_t>& order, bool write) {
  std::vector<std::unique_ptr<Worker>> workers;
  std::vector<std::vector<uint32_t>> shares(threads);
  const uint32_t per = depth / threads;
  for (uint32_t t = 0; t < threads; ++t) {
    workers.push_back(std::make_unique<Worker>(pool + size_t{t} * per * size, per, size));
  }
  for (size_t i = 0; i < order.size(); ++i) shares[i % threads].push_back(order[i]);
  const auto start = Clock::now();
  std::vector<std::thread> ts;
  for (uint32_t t = 0; t < threads; ++t) {
    ts.emplace_back([&, t] { workers[t]->Run(tier, slots, shares[t], write); });
  }
  for (auto& th : ts) th.join();
  return double(size) * order.size() / Seconds(start) / 1e9;
}

void RunSize(const Args& a, uint32_t size, uint8_t* pool) {
  const uint32_t count = static_cast<uint32_t>((a.mib_per_case << 20) / size);
  const std::string raw_path = a.dir + "/kvtier-bench-raw";
  const int fd = ::open(raw_path.c_str(), O_RDWR | O_CREAT | O_TRUNC | O_DIRECT, 0600);
  if (fd < 0 || ::posix_fallocate(fd, 0, off_t{size} * count) != 0) Die("raw file in " + a.dir);
  std::vector<uint32_t> seq(count), shuffled(count);
  std::iota(seq.begin(), seq.end(), 0);
  shuffled = seq;
  std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(42));
  RawGbps(fd, pool, size, a.queue_depth, seq, true);  // first touch, untimed
  double raw_w = 0, raw_r = 0;
  for (int k = 0; k < a.repeat; ++k) {
    raw_w = std::max(raw_w, RawGbps(fd, pool, size, a.queue_depth, seq, true));
    raw_r = std::max(raw_r, RawGbps(fd, pool, size, a.queue_depth, shuffled, false));
  }
  ::close(fd);
  ::unlink(raw_path.c_str());

  const std::string tdir = a.dir + "/kvtier-bench-t2";
  std::filesystem::remove_all(tdir);
  std::filesystem::create_directories(tdir);
  NvmeTierOptions o;
  o.directories = {tdir};
  o.slot_bytes = size;
  o.capacity_bytes = uint64_t{size} * count;
  o.queue_depth = a.queue_depth;
  o.durability = T2Durability::kNone;
  o.registered_ranges = {{pool, size_t{size} * a.queue_depth}};
  auto tier = NvmeTier::Open(o, nullptr);
  if (!tier.ok()) Die(tier.status().ToString());
  std::vector<SlotId> slots(count);
  for (auto& s : slots) s = *(*tier)->Allocate();
  TierGbps(**tier, pool, size, a.queue_depth, 1, slots, seq, true);  // first touch, untimed
  double r[2][2] = {};  // [threads 1 / N][write / read]
  const uint32_t nthreads[2] = {1, a.threads};
  for (int k = 0; k < a.repeat; ++k) {
    for (int t = 0; t < 2; ++t) {
      r[t][0] = std::max(
          r[t][0], TierGbps(**tier, pool, size, a.queue_depth, nthreads[t], slots, seq, true));
      r[t][1] = std::max(r[t][1], TierGbps(**tier, pool, size, a.queue_depth, nthreads[t], slots,
                                           shuffled, false));
    }
  }
  tier->reset();
  std::filesystem::remove_all(tdir);
  std::printf(
      "| %u KiB | %.2f | %.2f (%.0f%%) | %.2f (%.0f%%) | %.2f | %.2f (%.0f%%) | %.2f (%.0f%%) |\n",
      size >> 10, raw_w, r[0][0], 100 * r[0][0] / raw_w, r[1][0], 100 * r[1][0] / raw_w, raw_r,
      r[0][1], 100 * r[0][1] / raw_r, r[1][1], 100 * r[1][1] / raw_r);
  std::fflush(stdout);
}

// Warm restart: `records` records put straight into the metadata database (no payload writes),
// then NvmeTier::Open's whole rebuild and the scan alone (the ceiling).
void RunRestart(const Args& a) {
  const std::string tdir = a.dir + "/kvtier-bench-restart";
  std::filesystem::remove_all(tdir);
  std::filesystem::create_directories(tdir);
  NvmeTierOptions o;
  o.directories = {tdir};
  o.slot_bytes = 4096;
  o.capacity_bytes = uint64_t{4096} * a.records;
  o.preallocate = false;  // sparse: the rebuild never reads payloads
  o.durability = T2Durability::kNone;
  const SlotLayout layout{o.slot_bytes, 1, o.SlotsPerDirectory()};
  {
    auto meta = NvmeMetadata::Open(o.MetadataDirectory(), false, layout);
    if (!meta.ok()) Die(meta.status().ToString());
    std::vector<StoredRecord> batch;
    for (uint64_t i = 0; i < a.records; ++i) {
      batch.push_back(StoredRecord{BlockRecord{BlockKey{i * 0x9e3779b97f4a7c15ull, i}, 1, 4096, i},
                                   static_cast<SlotId>(i), i + 1});
      if (batch.size() == 10000 || i + 1 == a.records) {
        if (!(*meta)->PutBatch(batch).ok()) Die("metadata put");
        batch.clear();
      }
    }
  }
  // The tier's Open comes first after the writer closed the database: what a restart after a clean
  // shutdown costs (WAL replay included, if the close left any). Then the scan alone, as ceiling.
  uint64_t visited = 0;
  const double cpu0 = CpuSeconds();
  const auto open_start = Clock::now();
  auto tier = NvmeTier::Open(o, [&](const BlockRecord&, SlotId) { ++visited; });
  const double open_s = Seconds(open_start), open_cpu = CpuSeconds() - cpu0;
  if (!tier.ok() || visited != a.records) Die("warm restart");
  const double recover_s = (*tier)->recovery_seconds();
  tier->reset();
  double scan_s = 0;
  {
    auto meta = NvmeMetadata::Open(o.MetadataDirectory(), false, layout);
    uint64_t n = 0, bad = 0;
    const auto start = Clock::now();
    if (!(*meta)->Scan([&](const StoredRecord&) { ++n; }, &bad).ok() || n != a.records) Die("scan");
    scan_s = Seconds(start);
  }
  std::printf(
      "\n| records | RocksDB scan alone | rebuild (Recover) | whole Open | whole Open per "
      "CPU-second |\n"
      "| --- | --- | --- | --- | --- |\n");
  std::printf(
      "| %llu | %.2f M/s | %.2f M/s (%.3f s) | %.2f M/s (%.3f s) | %.2f M/s (%.3f CPU-s) |\n",
      static_cast<unsigned long long>(a.records), a.records / scan_s / 1e6,
      a.records / recover_s / 1e6, recover_s, a.records / open_s / 1e6, open_s,
      a.records / open_cpu / 1e6, open_cpu);
  std::filesystem::remove_all(tdir);
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  using namespace kvtier;
  const Args a = Parse(argc, argv);
  const uint32_t sizes[] = {256u << 10, 1u << 20, 4u << 20};
  const size_t pool_bytes = size_t{4u << 20} * a.queue_depth;
  auto* pool = static_cast<uint8_t*>(std::aligned_alloc(4096, pool_bytes));
  std::mt19937_64 rng(7);
  for (size_t i = 0; i < pool_bytes / 8; ++i) reinterpret_cast<uint64_t*>(pool)[i] = rng();
  std::printf("%llu MiB per case in %s, queue depth %u, N = %u threads, GB/s (%% of raw)\n\n",
              static_cast<unsigned long long>(a.mib_per_case), a.dir.c_str(), a.queue_depth,
              a.threads);
  std::printf(
      "| payload | raw write | T2 write 1 thr | T2 write N thr | raw read | T2 read 1 thr | T2 "
      "read N thr |\n");
  std::printf("| --- | --- | --- | --- | --- | --- | --- |\n");
  for (uint32_t size : sizes) RunSize(a, size, pool);
  RunRestart(a);
  std::free(pool);
  return 0;
}
