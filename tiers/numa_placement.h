// NumaPlacement: where on the machine the T1 segment lives (DESIGN.md "Tiers": bound to the NUMA
// node nearest the GPU, touched in parallel at start-up). A thin owner of one hwloc topology with
// the three things T1 needs from it: choose a node, bind a memory range to it, fault the range in
// from threads running on that node. A machine with one NUMA node goes through the same code.
//
// Thread-safety: const methods may run concurrently (hwloc allows concurrent use of a topology that
// is no longer modified); the topology is loaded once, in Create.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier {

struct NumaNode {
  int os_index = 0;  // the node number as the OS names it (numactl, /sys/devices/system/node)
  std::string why;   // how it was chosen, for the log: "nearest PCI device ...", "fallback ..."
};

class NumaPlacement {
 public:
  // Loads the topology; with_pci also discovers PCI devices (slower, only needed to place near
  // one).
  static absl::StatusOr<std::unique_ptr<NumaPlacement>> Create(bool with_pci);
  ~NumaPlacement();

  NumaPlacement(const NumaPlacement&) = delete;
  NumaPlacement& operator=(const NumaPlacement&) = delete;

  // The node nearest the PCI device `pci_bus_id` ("0000:3b:00.0" or "3b:00.0"). When the id is
  // empty, unknown, or the device has no locality, the node of the CPU the calling thread runs on,
  // else the first node; NumaNode::why says which and why. Never fails: placement is an
  // optimisation, a wrong node costs bandwidth, not correctness.
  NumaNode ChooseNode(std::string_view pci_bus_id) const;

  // Binds the pages of [addr, addr + len) to node `os_index` (strict bind): pages faulted after
  // this are allocated there. Precondition: addr page-aligned. An error (e.g. mbind refused in a
  // container) leaves the range with the default policy.
  absl::Status BindArea(void* addr, size_t len, int os_index) const;

  // Faults in every page of [addr, addr + len) for writing, split over `threads` threads (>= 1),
  // each bound to node `os_index`'s CPUs when it has any, so first-touch and the kernel's page
  // clearing happen on that node and in parallel. Uses MADV_POPULATE_WRITE when the kernel has it,
  // else writes one byte per page (the memory must be zero or not yet meaningful). Blocks until
  // done. ResourceExhausted when the kernel cannot back the pages.
  absl::Status TouchParallel(void* addr, size_t len, size_t page_bytes, unsigned threads,
                             int os_index) const;

  int num_nodes() const;

 private:
  struct Impl;
  explicit NumaPlacement(std::unique_ptr<Impl> impl);
  // 0, or the errno that stopped it.
  int TouchRange(char* begin, char* end, size_t page_bytes, int os_index) const;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvtier
