#include "tools/bench/ceilings.h"

#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <functional>
#include <thread>
#include <vector>

#include "common/mix.h"

namespace kvtier::bench {
namespace {

using Clock = std::chrono::steady_clock;

// Reads exactly n bytes; false on EOF or error.
bool ReadFull(int fd, std::byte* buf, size_t n) {
  while (n > 0) {
    const ssize_t got = ::read(fd, buf, n);
    if (got <= 0) return false;
    buf += got;
    n -= static_cast<size_t>(got);
  }
  return true;
}

bool WriteFull(int fd, const std::byte* buf, size_t n) {
  while (n > 0) {
    const ssize_t put = ::write(fd, buf, n);
    if (put <= 0) return false;
    buf += put;
    n -= static_cast<size_t>(put);
  }
  return true;
}

[[noreturn]] void Echo(int fd, uint32_t request_bytes, uint32_t response_bytes) {
  std::vector<std::byte> in(request_bytes), out(response_bytes, std::byte{1});
  while (ReadFull(fd, in.data(), in.size())) {
    out[0] = in[0];  // touch the request, as a server would
    if (!WriteFull(fd, out.data(), out.size())) break;
  }
  ::_exit(0);
}

}  // namespace

absl::StatusOr<LatencyHistogram> SocketRoundTrips(uint32_t request_bytes, uint32_t response_bytes,
                                                  uint64_t ops, double duration_s) {
  int fds[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, fds) != 0) {
    return absl::InternalError(fmt::format("socketpair: {}", std::strerror(errno)));
  }
  std::fflush(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    Echo(fds[1], request_bytes, response_bytes);
  }
  ::close(fds[1]);
  LatencyHistogram latency;
  std::vector<std::byte> request(request_bytes, std::byte{2}), response(response_bytes);
  const Clock::time_point deadline =
      Clock::now() + std::chrono::nanoseconds(static_cast<int64_t>(duration_s * 1e9));
  bool ok = pid > 0;
  for (uint64_t done = 0; ok && (ops > 0 ? done < ops : Clock::now() < deadline); ++done) {
    const Clock::time_point start = Clock::now();
    ok = WriteFull(fds[0], request.data(), request.size()) &&
         ReadFull(fds[0], response.data(), response.size());
    latency.Record(static_cast<uint64_t>((Clock::now() - start).count()));
  }
  ::close(fds[0]);  // the echo process sees EOF and exits
  if (pid > 0) ::waitpid(pid, nullptr, 0);
  if (!ok) return absl::InternalError("the socket echo process failed");
  return latency;
}

namespace {

// `threads` threads, each given its slots by slots_of(t) (called on that thread, before the clock
// starts), copy one block between a hot buffer of their own and their slots in turn for
// `duration_s`, all starting together; the sum of their rates in bytes/s.
double TimedCopies(uint32_t threads, uint32_t block_bytes, double duration_s,
                   CopyDirection direction,
                   const std::function<std::vector<std::byte*>(uint32_t)>& slots_of) {
  std::vector<double> rates(threads, 0.0);
  std::atomic<uint32_t> ready{0};
  std::vector<std::thread> pool;
  for (uint32_t t = 0; t < threads; ++t) {
    pool.emplace_back([&, t] {
      const std::vector<std::byte*> slots = slots_of(t);
      std::vector<std::byte> hot(block_bytes, std::byte{3});
      ready.fetch_add(1);
      while (ready.load() < threads) std::this_thread::yield();
      const Clock::time_point start = Clock::now();
      const Clock::time_point deadline =
          start + std::chrono::nanoseconds(static_cast<int64_t>(duration_s * 1e9));
      uint64_t n = 0;
      for (size_t i = 0; Clock::now() < deadline; i = (i + 1) % slots.size(), ++n) {
        if (direction == CopyDirection::kIntoCold) {
          std::memcpy(slots[i], hot.data(), block_bytes);
        } else {
          std::memcpy(hot.data(), slots[i], block_bytes);
        }
      }
      const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
      rates[t] = static_cast<double>(n * block_bytes) / seconds;
    });
  }
  for (std::thread& th : pool) th.join();
  double total = 0;
  for (double r : rates) total += r;
  return total;
}

}  // namespace

double MemcpyBandwidth(uint32_t threads, uint32_t block_bytes, double duration_s,
                       CopyDirection direction) {
  constexpr size_t kRegionBytes = size_t{256} << 20;
  const size_t blocks = std::max<size_t>(1, kRegionBytes / block_bytes);
  std::vector<std::vector<std::byte>> regions(threads);  // each thread's, faulted in by it
  return TimedCopies(threads, block_bytes, duration_s, direction, [&](uint32_t t) {
    regions[t].assign(blocks * block_bytes, std::byte{0});
    std::vector<std::byte*> slots;
    for (size_t i = 0; i < blocks; ++i) slots.push_back(regions[t].data() + i * block_bytes);
    return slots;
  });
}

namespace {

// A shared, faulted-in segment: what a client's T1 mapping is.
struct SharedSegment {
  std::byte* base = nullptr;
  uint64_t bytes = 0;
  ~SharedSegment() {
    if (base != nullptr) ::munmap(base, bytes);
  }
};

absl::Status MapShared(uint64_t bytes, SharedSegment* seg) {
  const int fd = ::memfd_create("kvtier-bench-t1", MFD_CLOEXEC);
  if (fd < 0 || ::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    if (fd >= 0) ::close(fd);
    return absl::InternalError("memfd for the T1-shaped memcpy ceiling");
  }
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  ::close(fd);
  if (p == MAP_FAILED) return absl::InternalError("mmap for the T1-shaped memcpy ceiling");
  seg->base = static_cast<std::byte*>(p);
  seg->bytes = bytes;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<double> MemcpyT1ShapedBandwidth(uint32_t threads, uint32_t block_bytes,
                                               uint64_t region_bytes, double duration_s,
                                               CopyDirection direction) {
  SharedSegment seg;
  KVTIER_RETURN_IF_ERROR(MapShared(region_bytes, &seg));
  const uint64_t slots = region_bytes / block_bytes;
  if (slots < threads) return absl::InvalidArgumentError("T1 holds fewer slots than threads");
  return TimedCopies(threads, block_bytes, duration_s, direction, [&](uint32_t t) {
    // This thread's part of the slots, in a shuffled order (splitmix-driven Fisher-Yates).
    const uint64_t first = slots * t / threads, count = slots * (t + 1) / threads - first;
    std::vector<std::byte*> order(count);
    for (uint64_t i = 0; i < count; ++i) order[i] = seg.base + (first + i) * block_bytes;
    for (uint64_t i = count - 1; i > 0; --i) {
      std::swap(order[i], order[SplitMix64Finalize(i * 0x9e3779b97f4a7c15ull + t) % (i + 1)]);
    }
    return order;
  });
}

}  // namespace kvtier::bench
