#include "tiers/host_tier.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <linux/memfd.h>  // MFD_HUGE_2MB
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <fstream>
#include <numeric>
#include <string>
#include <thread>
#include <vector>

#include "common/errno_text.h"
#include "common/huge_pages.h"
#include "common/log.h"
#include "tiers/numa_placement.h"

namespace kvtier {
namespace {

constexpr uint32_t kDirectIoAlign = 4096;
constexpr unsigned kMaxTouchThreads = 1024;

const char* HugePagesName(HugePages h) {
  switch (h) {
    case HugePages::kOn:
      return "on";
    case HugePages::kOff:
      return "off";
    default:
      return "auto";
  }
}

// A mapped memfd; owned by the caller (HostTier) once returned.
struct Segment {
  int fd = -1;
  void* base = nullptr;
  size_t page_bytes = 0;
  bool huge = false;
};

absl::StatusOr<Segment> MapSegment(const std::string& name, size_t size, bool huge) {
  const unsigned flags = MFD_CLOEXEC | MFD_ALLOW_SEALING | (huge ? MFD_HUGETLB | MFD_HUGE_2MB : 0u);
  const int fd = memfd_create(name.c_str(), flags);
  if (fd < 0) return absl::InternalError("memfd_create: " + ErrnoText(errno));
  if (ftruncate(fd, static_cast<off_t>(size)) != 0) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(
        fmt::format("ftruncate to {} bytes: {}", size, ErrnoText(err)));
  }
  // Clients receive this fd: sealed, none of them can shrink it under the daemon (a SIGBUS on the
  // daemon's next access) or grow it.
  if (fcntl(fd, F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) != 0) {
    const int err = errno;
    close(fd);
    return absl::InternalError(fmt::format("sealing the T1 memfd: {}", ErrnoText(err)));
  }
  // For hugetlb the pages are reserved here, so a shortage fails now, never as a SIGBUS later.
  void* base = mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED) {
    const int err = errno;
    close(fd);
    return absl::ResourceExhaustedError(fmt::format("mmap of {} bytes: {}", size, ErrnoText(err)));
  }
  const size_t page = huge ? kHugePageBytes : static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return Segment{fd, base, page, huge};
}

std::string ReadSysFile(const char* path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line.empty() ? "unknown" : line;
}

std::string HugePageHint(uint64_t capacity) {
  return fmt::format(
      "to use them, reserve {} or more 2 MiB pages: sysctl -w vm.nr_hugepages={} (now {})",
      capacity / kHugePageBytes, capacity / kHugePageBytes,
      ReadSysFile("/proc/sys/vm/nr_hugepages"));
}

absl::StatusOr<Segment> CreateSegment(const HostTierOptions& options) {
  const uint64_t capacity = options.capacity_bytes;
  // Shared memory is not overcommitted safely: without this check a too-large segment is mapped
  // fine and then kills the daemon (or its neighbours) while being faulted in.
  const uint64_t physical = uint64_t(sysconf(_SC_PHYS_PAGES)) * uint64_t(sysconf(_SC_PAGESIZE));
  if (capacity > physical) {
    return absl::ResourceExhaustedError(
        fmt::format("t1.capacity_bytes: {} is more than this machine's {} bytes of memory",
                    capacity, physical));
  }
  if (options.huge_pages != HugePages::kOff) {
    if (capacity % kHugePageBytes != 0) {
      KVTIER_LOG(kInfo, "t1",
                 "not using huge pages: t1.capacity_bytes ({}) is not a multiple of 2 MiB",
                 capacity);
    } else {
      absl::StatusOr<Segment> huge = MapSegment(options.segment_name, capacity, /*huge=*/true);
      if (huge.ok()) return huge;
      if (options.huge_pages == HugePages::kOn) {
        return absl::FailedPreconditionError(fmt::format(
            "t1.huge_pages = on, but {} bytes of 2 MiB huge pages are not available: {}; {}",
            capacity, std::string(huge.status().message()), HugePageHint(capacity)));
      }
      // Start-up time is dominated by faulting 4 KiB pages in (docs/benchmarks.md "T1 host tier"),
      // so the operator is told both ways out.
      KVTIER_LOG(kInfo, "t1",
                 "huge pages unavailable ({}): falling back to normal pages, with transparent huge "
                 "pages where the kernel gives them (/sys/kernel/mm/transparent_hugepage/"
                 "shmem_enabled: {}; 'advise' lets this segment have them); {}",
                 std::string(huge.status().message()),
                 ReadSysFile("/sys/kernel/mm/transparent_hugepage/shmem_enabled"),
                 HugePageHint(capacity));
    }
  }
  KVTIER_ASSIGN_OR_RETURN(Segment seg, MapSegment(options.segment_name, capacity, /*huge=*/false));
  // Fewer TLB misses for clients streaming whole slots; a no-op where shmem THP is disabled.
  if (madvise(seg.base, capacity, MADV_HUGEPAGE) != 0) {
    KVTIER_LOG(kDebug, "t1", "madvise(MADV_HUGEPAGE): {}", ErrnoText(errno));
  }
  return seg;
}

// The chunks the segment grows in: from first_ready_bytes doubling up to max_chunk, each a multiple
// of grain (whole slots, whole pages) but the last, which ends at size. Small first chunks make the
// first slots usable early; large later ones keep registration calls few.
struct GrowthPlan {
  std::vector<size_t> chunk_ends;
  uint64_t wait_bytes = 0;  // what Create waits for
};

GrowthPlan PlanGrowth(uint64_t size, uint64_t grain, uint64_t first_ready, uint64_t max_chunk) {
  auto round_up = [grain](uint64_t x) { return std::max(grain, (x + grain - 1) / grain * grain); };
  max_chunk = std::max(grain, max_chunk / grain * grain);
  GrowthPlan plan;
  plan.wait_bytes = first_ready == 0 ? size : std::min(size, round_up(first_ready));
  uint64_t chunk = std::min(max_chunk, round_up(first_ready == 0 ? max_chunk : first_ready));
  for (uint64_t end = 0; end < size; chunk = std::min(max_chunk, chunk * 2)) {
    end = std::min(size, end + chunk);
    plan.chunk_ends.push_back(end);
  }
  return plan;
}

}  // namespace

absl::Status HostTierOptions::Validate() const {
  std::vector<std::string> problems;
  const bool slot_ok = slot_bytes != 0 && slot_bytes % kDirectIoAlign == 0;
  if (!slot_ok) {
    problems.push_back(fmt::format(
        "t1.slot_bytes: {} is not a positive multiple of {} (slots move to NVMe with O_DIRECT)",
        slot_bytes, kDirectIoAlign));
  }
  if (capacity_bytes == 0) {
    problems.push_back("t1.capacity_bytes: must be > 0");
  } else if (slot_ok && capacity_bytes % slot_bytes != 0) {
    problems.push_back(fmt::format("t1.capacity_bytes: {} is not a multiple of t1.slot_bytes ({})",
                                   capacity_bytes, slot_bytes));
  } else if (slot_ok && capacity_bytes / slot_bytes >= kNoSlot) {
    problems.push_back(fmt::format(
        "t1.capacity_bytes: {} makes {} slots of t1.slot_bytes ({}); a tier addresses at most {}",
        capacity_bytes, capacity_bytes / slot_bytes, slot_bytes, kNoSlot - 1));
  }
  if (huge_pages == HugePages::kOn && capacity_bytes % kHugePageBytes != 0) {
    problems.push_back(fmt::format(
        "t1.capacity_bytes: {} is not a multiple of 2 MiB, which t1.huge_pages = on needs",
        capacity_bytes));
  }
  if (dma_chunk_bytes == 0 || (slot_ok && dma_chunk_bytes % slot_bytes != 0)) {
    problems.push_back(
        fmt::format("t1.dma_chunk_bytes: {} is not a positive multiple of t1.slot_bytes ({})",
                    dma_chunk_bytes, slot_bytes));
  }
  if (touch_threads > kMaxTouchThreads) {
    problems.push_back(
        fmt::format("t1.touch_threads: {} is more than {} (0 means one per hardware thread)",
                    touch_threads, kMaxTouchThreads));
  }
  const auto bad = std::find_if_not(numa_pci_bus_id.begin(), numa_pci_bus_id.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) || c == ':' || c == '.';
  });
  if (bad != numa_pci_bus_id.end()) {
    problems.push_back(fmt::format(
        "t1.numa_pci_bus_id: \"{}\" is not a PCI bus id like 0000:3b:00.0", numa_pci_bus_id));
  }
  if (problems.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(fmt::format("{}", fmt::join(problems, "\n")));
}

HostTier::HostTier(int fd, std::byte* base, size_t size, uint32_t slot_bytes)
    : fd_(fd),
      base_(base),
      size_(size),
      slot_bytes_(slot_bytes),
      allocator_(static_cast<uint32_t>(size / slot_bytes), /*ready=*/0) {}

HostTier::~HostTier() {
  dma_.reset();  // stops the growth and unregisters before the memory goes away
  munmap(base_, size_);
  close(fd_);
}

absl::StatusOr<std::unique_ptr<HostTier>> HostTier::Create(const HostTierOptions& options) {
  KVTIER_RETURN_IF_ERROR(options.Validate());
  const auto start = std::chrono::steady_clock::now();
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<NumaPlacement> numa,
                          NumaPlacement::Create(!options.numa_pci_bus_id.empty()));
  const NumaNode node = numa->ChooseNode(options.numa_pci_bus_id);
  KVTIER_ASSIGN_OR_RETURN(Segment seg, CreateSegment(options));
  // From here the tier owns fd and mapping, so every early return below releases them.
  std::unique_ptr<HostTier> tier(new HostTier(seg.fd, static_cast<std::byte*>(seg.base),
                                              options.capacity_bytes, options.slot_bytes));
  tier->numa_ = std::move(numa);
  HostTierPlacement& where = tier->placement_;
  where.numa_node = node.os_index;
  where.numa_why = node.why;
  where.page_bytes = seg.page_bytes;
  where.huge_pages = seg.huge;
  const unsigned threads = options.touch_threads != 0
                               ? options.touch_threads
                               : std::max(1u, std::thread::hardware_concurrency());
  KVTIER_RETURN_IF_ERROR(tier->BindAndGrow(options, threads));
  where.create_seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  KVTIER_LOG(kInfo, "t1",
             "segment of {} bytes ({} slots of {} bytes, huge_pages={}): NUMA node {} of {} ({}, "
             "{}), {} KiB pages{}, faulted in by {} threads; {} slots usable in {:.3f} s, the rest "
             "grows in the background",
             tier->size_, tier->capacity_slots(), tier->slot_bytes_,
             HugePagesName(options.huge_pages), node.os_index, tier->numa_->num_nodes(), node.why,
             where.numa_bound ? "bound" : "not bound", seg.page_bytes / 1024,
             seg.huge ? " (hugetlb)" : "", threads, tier->ready_slots(), where.create_seconds);
  return tier;
}

absl::Status HostTier::BindAndGrow(const HostTierOptions& options, unsigned threads) {
  // Bind before the first touch: the policy decides where a page goes when it is faulted in.
  const absl::Status bound = numa_->BindArea(base_, size_, placement_.numa_node);
  placement_.numa_bound = bound.ok();
  if (!bound.ok()) {
    KVTIER_LOG(kWarn, "t1",
               "segment not bound to its NUMA node, pages go where the kernel puts "
               "them: {}",
               std::string(bound.message()));
  }
  const GrowthPlan plan = PlanGrowth(size_, std::lcm<uint64_t>(slot_bytes_, placement_.page_bytes),
                                     options.first_ready_bytes, options.dma_chunk_bytes);
  const size_t page = placement_.page_bytes;
  const int node = placement_.numa_node;
  dma_ = DmaRegistration::Start(
      base_, size_, plan.chunk_ends,
      [this, page, threads, node, hook = options.before_touch_for_test](char* begin, size_t bytes) {
        const uint64_t offset = static_cast<uint64_t>(begin - reinterpret_cast<char*>(base_));
        if (hook && offset != 0) hook(offset);
        return numa_->TouchParallel(begin, bytes, page, threads, node);
      },
      [this](uint64_t ready) { allocator_.Grow(static_cast<uint32_t>(ready / slot_bytes_)); });
  dma_->WaitReady(plan.wait_bytes);
  // Nothing left to grow: no thread outlives Create (a small T1, in tests that fork, stays simple).
  // Not in a GPU build, where the thread still registers the first chunk: that call creates the GPU
  // context (0.3 s on the H100), which serving does not wait for (see DmaRegistration), whatever
  // T1's size.
  if (plan.wait_bytes == size_ && !DmaRegistration::BackendAvailable()) dma_->Join();
  if (dma_->ready_bytes() >= plan.wait_bytes) return absl::OkStatus();
  return dma_->Wait();  // stopped before the first part: the touch error
}
absl::StatusOr<SlotId> HostTier::Allocate() { return allocator_.Allocate(); }

void HostTier::Free(SlotId slot) {
  const absl::Status status = allocator_.Free(slot);
  if (!status.ok()) KVTIER_LOG(kError, "t1", "refused: {}", std::string(status.message()));
}

void HostTier::Write(SlotId slot, const BlockRecord& record, const void* src, IoDone done) {
  absl::Status status;
  if (!ValidSlot(slot) || record.payload_bytes > slot_bytes_) {
    io_.WriteErrors();
    status = absl::InvalidArgumentError(
        fmt::format("t1 write: slot {} of {}, payload {} bytes of at most {}", slot,
                    capacity_slots(), record.payload_bytes, slot_bytes_));
  } else {
    std::memcpy(SlotData(slot), src, record.payload_bytes);
    io_.Write(record.payload_bytes);
  }
  if (done) done(std::move(status));
}

void HostTier::Read(SlotId slot, void* dst, IoDone done) {
  absl::Status status;
  if (!ValidSlot(slot)) {
    io_.ReadError();
    status = absl::InvalidArgumentError(
        fmt::format("t1 read: slot {} out of range ({} slots)", slot, capacity_slots()));
  } else {
    std::memcpy(dst, SlotData(slot), slot_bytes_);
    io_.Read(slot_bytes_);
  }
  if (done) done(std::move(status));
}

TierStats HostTier::Stats() const {
  TierStats s;
  s.slot_bytes = slot_bytes_;
  s.capacity_slots = capacity_slots();
  s.used_slots = allocator_.used();
  s.ready_slots = allocator_.ready();
  io_.Fill(s);
  s.rejected_allocations = allocator_.exhausted();
  return s;
}

}  // namespace kvtier
