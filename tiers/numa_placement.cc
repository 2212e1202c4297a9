#include "tiers/numa_placement.h"

#include <fmt/format.h>
#include <hwloc.h>
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "common/errno_text.h"
#include "common/log.h"

namespace kvtier {

struct NumaPlacement::Impl {
  hwloc_topology_t topology = nullptr;
  ~Impl() {
    if (topology != nullptr) hwloc_topology_destroy(topology);
  }
};

namespace {

// A bitmap freed at scope exit.
struct Bitmap {
  hwloc_bitmap_t bits = hwloc_bitmap_alloc();
  ~Bitmap() { hwloc_bitmap_free(bits); }
};

}  // namespace

NumaPlacement::NumaPlacement(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
NumaPlacement::~NumaPlacement() = default;

absl::StatusOr<std::unique_ptr<NumaPlacement>> NumaPlacement::Create(bool with_pci) {
  auto impl = std::make_unique<Impl>();
  if (hwloc_topology_init(&impl->topology) != 0) {
    impl->topology = nullptr;
    return absl::InternalError("hwloc_topology_init: " + ErrnoText(errno));
  }
  if (with_pci) {
    hwloc_topology_set_io_types_filter(impl->topology, HWLOC_TYPE_FILTER_KEEP_IMPORTANT);
  }
  if (hwloc_topology_load(impl->topology) != 0) {
    return absl::InternalError("hwloc_topology_load: " + ErrnoText(errno));
  }
  return std::unique_ptr<NumaPlacement>(new NumaPlacement(std::move(impl)));
}

int NumaPlacement::num_nodes() const {
  return std::max(1, hwloc_get_nbobjs_by_type(impl_->topology, HWLOC_OBJ_NUMANODE));
}

NumaNode NumaPlacement::ChooseNode(std::string_view pci_bus_id) const {
  hwloc_topology_t topo = impl_->topology;
  std::string fallback_reason = "no t1.numa_pci_bus_id configured";
  if (!pci_bus_id.empty()) {
    const std::string bus(pci_bus_id);
    hwloc_obj_t dev = hwloc_get_pcidev_by_busidstring(topo, bus.c_str());
    hwloc_obj_t anc = dev == nullptr ? nullptr : hwloc_get_non_io_ancestor_obj(topo, dev);
    if (dev == nullptr) {
      fallback_reason = fmt::format("PCI device {} not found on this machine", bus);
    } else if (anc == nullptr || anc->nodeset == nullptr || hwloc_bitmap_iszero(anc->nodeset)) {
      fallback_reason = fmt::format("PCI device {} reports no NUMA locality", bus);
    } else {
      const int node = hwloc_bitmap_first(anc->nodeset);
      const bool several = hwloc_bitmap_weight(anc->nodeset) > 1;
      return NumaNode{node,
                      fmt::format("nearest PCI device {}{}", bus,
                                  several ? " (attached to several nodes; took the first)" : "")};
    }
  }
  Bitmap cpus, nodes;
  if (hwloc_get_last_cpu_location(topo, cpus.bits, HWLOC_CPUBIND_THREAD) == 0) {
    hwloc_cpuset_to_nodeset(topo, cpus.bits, nodes.bits);
    const int node = hwloc_bitmap_first(nodes.bits);
    if (node >= 0) {
      return NumaNode{node, fmt::format("{}: node of the calling thread's CPU {}", fallback_reason,
                                        hwloc_bitmap_first(cpus.bits))};
    }
  }
  hwloc_obj_t first = hwloc_get_obj_by_type(topo, HWLOC_OBJ_NUMANODE, 0);
  return NumaNode{first == nullptr ? 0 : static_cast<int>(first->os_index),
                  fallback_reason + ": calling thread's CPU unknown, first node"};
}

absl::Status NumaPlacement::BindArea(void* addr, size_t len, int os_index) const {
  Bitmap nodes;
  hwloc_bitmap_only(nodes.bits, static_cast<unsigned>(os_index));
  if (hwloc_set_area_membind(impl_->topology, addr, len, nodes.bits, HWLOC_MEMBIND_BIND,
                             HWLOC_MEMBIND_BYNODESET) != 0) {
    return absl::UnavailableError(
        fmt::format("binding {} bytes to NUMA node {}: {}", len, os_index, ErrnoText(errno)));
  }
  return absl::OkStatus();
}

int NumaPlacement::TouchRange(char* begin, char* end, size_t page_bytes, int os_index) const {
  hwloc_obj_t node = hwloc_get_numanode_obj_by_os_index(impl_->topology, os_index);
  if (node != nullptr && node->cpuset != nullptr && !hwloc_bitmap_iszero(node->cpuset)) {
    // Best effort: a cgroup may forbid those CPUs; the bind policy still places the pages.
    hwloc_set_cpubind(impl_->topology, node->cpuset, HWLOC_CPUBIND_THREAD);
  }
  if (begin >= end) return 0;
#ifdef MADV_POPULATE_WRITE
  // One syscall faults the whole range without a trap per page, and reports ENOMEM as an error
  // where a plain write to an unbackable shared page would be a SIGBUS. Only EINVAL (a kernel
  // older than 5.14) falls through to touching.
  if (madvise(begin, static_cast<size_t>(end - begin), MADV_POPULATE_WRITE) == 0) return 0;
  if (errno != EINVAL) return errno;
#endif
  for (volatile char* p = begin; p < end; p += page_bytes) *p = 0;
  return 0;
}

absl::Status NumaPlacement::TouchParallel(void* addr, size_t len, size_t page_bytes,
                                          unsigned threads, int os_index) const {
  if (page_bytes == 0 || threads == 0) {
    return absl::InvalidArgumentError("TouchParallel: page_bytes and threads must be > 0");
  }
  const size_t pages = len / page_bytes;
  const size_t n = std::max<size_t>(1, std::min<size_t>(threads, pages));
  char* const base = static_cast<char*>(addr);
  std::vector<std::thread> workers;
  std::vector<int> errors(n, 0);
  workers.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // Whole pages per thread, so no page is faulted by two threads.
    char* begin = base + pages * i / n * page_bytes;
    char* end = base + pages * (i + 1) / n * page_bytes;
    if (i + 1 == n) end = base + len;
    workers.emplace_back(
        [=, this, &errors] { errors[i] = TouchRange(begin, end, page_bytes, os_index); });
  }
  for (std::thread& t : workers) t.join();
  for (int err : errors) {
    if (err != 0) {
      return absl::ResourceExhaustedError(
          fmt::format("faulting in {} bytes on NUMA node {}: {}", len, os_index, ErrnoText(err)));
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier
