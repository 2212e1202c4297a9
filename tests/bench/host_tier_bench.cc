// T1 start-up cost (issue 3: allocation + touch + registration <= 0.6 s per 8 GiB on the H100
// machine), next to ceilings measured in the same run (docs/benchmarks.md "T1 host tier"):
//
//   memset         a plain single-threaded memset of a fresh anonymous mapping of the same size:
//                  what faulting the memory in from one thread costs on this machine.
//   cudaMallocHost (GPU build) pinned allocation of the same size the slow, usual way
//                  (DESIGN.md: 2.55 s per 8 GiB on the H100 machine).
//
// T1 is timed twice (issue 12, T1 ready at once): first usable = HostTier::Create (memfd + NUMA
// bind + the first t1.first_ready_bytes faulted in and registered: when kvtierd may serve), fully
// usable = until the background growth has faulted in and registered every chunk (registration: 0
// in the CPU build). Sizes run one after another; each segment is freed before the next is made,
// so peak memory is the largest size. The page size column says whether reserved 2 MiB pages were
// used (t1.huge_pages = auto).
//
//   kvtier_host_tier_bench [--gib 1,4] [--touch-threads N] [--repeat R] [--pci BUS_ID]
//   (defaults: 1 and 4 GiB, one thread per hardware thread, best of 1, node of the main thread)
#include <sys/mman.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "tiers/host_tier.h"

namespace kvtier {
namespace {

using Clock = std::chrono::steady_clock;
constexpr double kGiB = 1024.0 * 1024.0 * 1024.0;

struct Options {
  std::vector<double> gib = {1, 4};
  unsigned touch_threads = 0;
  int repeat = 1;
  std::string pci;  // place T1 near this PCI device (the GPU), as the daemon does
};

[[noreturn]] void Usage(const char* argv0) {
  std::fprintf(stderr, "usage: %s [--gib 1,4,8] [--touch-threads N] [--repeat R] [--pci BUS_ID]\n",
               argv0);
  std::exit(2);
}

Options ParseArgs(int argc, char** argv) {
  Options o;
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string flag = argv[i];
    if (flag == "--gib") {
      o.gib.clear();
      for (char* p = argv[i + 1]; *p != '\0';) {
        o.gib.push_back(std::strtod(p, &p));
        if (*p == ',') ++p;
      }
    } else if (flag == "--touch-threads") {
      o.touch_threads = static_cast<unsigned>(std::strtoul(argv[i + 1], nullptr, 10));
    } else if (flag == "--pci") {
      o.pci = argv[i + 1];
    } else if (flag == "--repeat") {
      o.repeat = std::atoi(argv[i + 1]);
    } else {
      Usage(argv[0]);
    }
  }
  if ((argc - 1) % 2 != 0 || o.gib.empty() || o.repeat < 1) Usage(argv[0]);
  for (double g : o.gib) {
    if (g <= 0) Usage(argv[0]);
  }
  return o;
}

double Since(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Seconds for mmap + single-threaded memset of `bytes` fresh anonymous bytes (faults included).
double MemsetSeconds(size_t bytes) {
  const auto start = Clock::now();
  void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) return -1;
  std::memset(p, 1, bytes);
  const double secs = Since(start);
  munmap(p, bytes);
  return secs;
}

// Seconds for cudaMallocHost of `bytes`; -1 without a GPU build or on error.
double PinnedAllocSeconds(size_t bytes) {
  if (!gpu::UnavailableReason().empty()) return -1;
  const auto start = Clock::now();
  auto p = gpu::PinnedAlloc(bytes);
  const double secs = Since(start);
  if (!p.ok()) {
    std::fprintf(stderr, "%s\n", p.status().ToString().c_str());
    return -1;
  }
  (void)gpu::PinnedFree(*p);
  return secs;
}

struct T1Times {
  double create = -1;  // HostTier::Create: memfd + bind + the first part touched and registered
  double full = -1;    // from the start of Create until every chunk is touched and registered
  bool huge = false;
};

T1Times HostTierSeconds(size_t bytes, const Options& o) {
  HostTierOptions options;
  options.capacity_bytes = bytes;
  options.touch_threads = o.touch_threads;
  options.numa_pci_bus_id = o.pci;
  T1Times t;
  const auto start = Clock::now();
  absl::StatusOr<std::unique_ptr<HostTier>> tier = HostTier::Create(options);
  t.create = Since(start);
  if (!tier.ok()) {
    std::fprintf(stderr, "HostTier::Create: %s\n", tier.status().ToString().c_str());
    t.create = -1;
    return t;
  }
  const absl::Status reg = (*tier)->dma().Wait();
  t.full = Since(start);
  if (!reg.ok()) std::fprintf(stderr, "DMA registration: %s\n", reg.ToString().c_str());
  t.huge = (*tier)->placement().huge_pages;
  return t;
}

// "1.234" or "-" for a figure not measured.
std::string Fmt(double secs) {
  if (secs < 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.3f", secs);
  return buf;
}

void RunSize(double gib, const Options& o) {
  const size_t bytes = static_cast<size_t>(gib * kGiB) / (256 * 1024) * (256 * 1024);
  T1Times best;
  double memset_s = -1, pinned_s = -1;
  for (int r = 0; r < o.repeat; ++r) {
    const T1Times t = HostTierSeconds(bytes, o);
    if (best.create < 0 || t.full < best.full) best = t;
    const double m = MemsetSeconds(bytes);
    if (memset_s < 0 || (m >= 0 && m < memset_s)) memset_s = m;
    const double p = PinnedAllocSeconds(bytes);
    if (pinned_s < 0 || (p >= 0 && p < pinned_s)) pinned_s = p;
  }
  const double full = best.create < 0 ? -1 : best.full;
  const double per_gib = bytes / kGiB;
  std::printf("| %.2f | %s | **%s** | **%s** | %s | %s | %s | %s |\n", per_gib,
              best.huge ? "2 MiB" : "4 KiB", Fmt(best.create).c_str(), Fmt(full).c_str(),
              Fmt(full < 0 ? -1 : full / per_gib).c_str(), Fmt(memset_s).c_str(),
              Fmt(pinned_s).c_str(), full > 0 && memset_s > 0 ? Fmt(memset_s / full).c_str() : "-");
  std::fflush(stdout);
}

}  // namespace
}  // namespace kvtier

int main(int argc, char** argv) {
  const kvtier::Options o = kvtier::ParseArgs(argc, argv);
  // Create the GPU context outside every timed region (no-op in the CPU variant).
  if (kvtier::gpu::UnavailableReason().empty()) (void)kvtier::gpu::SetDevice(0);
  std::printf("T1 start-up, best of %d; seconds (DMA registration: %s build)\n\n", o.repeat,
              kvtier::DmaRegistration::BackendName());
  std::printf(
      "| GiB | pages | T1 first usable (Create) | T1 fully usable | T1 full s/GiB | "
      "memset 1 thread | cudaMallocHost | memset / T1 full |\n"
      "| --- | --- | --- | --- | --- | --- | --- | --- |\n");
  for (double gib : o.gib) kvtier::RunSize(gib, o);
  return 0;
}
