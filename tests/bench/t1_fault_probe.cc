// Where T1's fully-usable time goes on a host (docs/benchmarks.md "T1 host tier"): faulting a fresh
// segment in (the kernel allocates and zeroes every page; in a VM the host may back it too) against
// writing the same memory again once it is resident (the machine's write bandwidth), with the same
// threads, for each kind of memory T1 could use: a 2 MiB hugetlb memfd (T1 with reserved huge
// pages), a 4 KiB memfd (T1 without), and private anonymous memory with THP (not shareable, so not
// T1; DESIGN.md's "mmap + touch" ceiling). Two rounds each, the memory freed in between. If
// faulting in is far slower than writing and does not scale with threads, no T1 code can beat it.
//
// Not built by CMake (no kvtier dependency; it runs where only the C++ runtime is):
//   g++ -O2 -pthread -static-libstdc++ -static-libgcc tests/bench/t1_fault_probe.cc -o
//   t1_fault_probe t1_fault_probe [GIB=8] [THREADS=16]        # the hugetlb rows need GIB * 512
//   reserved 2 MiB pages
#include <linux/memfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;
constexpr size_t kHuge = size_t{2} << 20;

enum class Kind { kHugetlbMemfd, kMemfd, kPrivateThp };

// Faults in (MADV_POPULATE_WRITE) or memsets [p, p + size) from `threads` threads, each a run of
// whole 2 MiB pages; returns the seconds.
double Parallel(char* p, size_t size, unsigned threads, bool populate) {
  const auto start = Clock::now();
  const size_t per = (size / threads + kHuge - 1) / kHuge * kHuge;
  std::vector<std::thread> workers;
  for (size_t begin = 0; begin < size; begin += per) {
    const size_t len = std::min(per, size - begin);
    workers.emplace_back([=] {
      if (!populate) {
        std::memset(p + begin, 0x5a, len);
      } else if (madvise(p + begin, len, MADV_POPULATE_WRITE) != 0) {
        std::perror("madvise(MADV_POPULATE_WRITE)");
      }
    });
  }
  for (std::thread& t : workers) t.join();
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// A fresh mapping of `size` bytes of `kind`, or nullptr (and *fd = -1) with the reason printed.
char* Map(Kind kind, size_t size, int* fd) {
  *fd = -1;
  if (kind == Kind::kPrivateThp) {
    void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return nullptr;
    madvise(p, size, MADV_HUGEPAGE);
    return static_cast<char*>(p);
  }
  *fd = memfd_create("t1-probe", kind == Kind::kHugetlbMemfd ? MFD_HUGETLB | MFD_HUGE_2MB : 0);
  if (*fd < 0 || ftruncate(*fd, static_cast<off_t>(size)) != 0) return nullptr;
  void* p = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, *fd, 0);
  return p == MAP_FAILED ? nullptr : static_cast<char*>(p);
}

void Probe(const char* name, Kind kind, size_t size, unsigned threads) {
  for (int round = 1; round <= 2; ++round) {
    int fd = -1;
    char* p = Map(kind, size, &fd);
    if (p == nullptr) {
      std::printf("%-22s: %s\n", name, std::strerror(errno));
      if (fd >= 0) close(fd);
      return;
    }
    const double fault = Parallel(p, size, threads, /*populate=*/true);
    const double write = Parallel(p, size, threads, /*populate=*/false);
    std::printf(
        "%-22s %4.0f GiB %2u threads round %d: fault in %.3f s (%.1f GB/s), then write resident "
        "%.3f s (%.1f GB/s)\n",
        name, size / double(1 << 30), threads, round, fault, size / fault / 1e9, write,
        size / write / 1e9);
    munmap(p, size);
    if (fd >= 0) close(fd);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const size_t size = size_t(argc > 1 ? std::atoi(argv[1]) : 8) << 30;
  const unsigned threads = argc > 2 ? static_cast<unsigned>(std::atoi(argv[2])) : 16;
  Probe("memfd hugetlb 2 MiB", Kind::kHugetlbMemfd, size, threads);
  Probe("memfd hugetlb 2 MiB", Kind::kHugetlbMemfd, size_t{1} << 30, 1);  // one thread: 1 GiB
  Probe("memfd 4 KiB", Kind::kMemfd, size, threads);
  Probe("private anon + THP", Kind::kPrivateThp, size, threads);
  return 0;
}
