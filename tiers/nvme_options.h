// Configuration of the T2 NVMe tier (DESIGN.md "Tiers"): where its slot files live, how large they
// are, how deep its queues run and how durable a completed write is. Validated once, at start
// (DESIGN.md "Reliability rules": a clear error that names the setting).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier {

// A span of caller memory (the T1 segment) that the tier registers with every io_uring as fixed
// buffers, so a transfer to or from it is one DMA without per-I/O page pinning. The caller keeps
// it mapped for the tier's lifetime.
struct RegisteredRange {
  void* base = nullptr;
  size_t bytes = 0;
};

enum class T2Durability {
  kNone,       // a completed write is in the device's queue; RocksDB writes are not synced
  kFdatasync,  // each completion batch is fdatasync'ed, then its records are put with sync=true
};

struct NvmeTierOptions {
  // One directory per device; each gets one slot file and its own io_uring. Slots are striped
  // across them (slot s lives in directory s % N). Must exist and be writable.
  std::vector<std::string> directories;
  // Bytes of slots per directory: a positive multiple of slot_bytes.
  uint64_t capacity_bytes = 0;
  // Bytes per slot: a positive multiple of 4096, at most 1 GiB (one fixed buffer).
  uint32_t slot_bytes = 2u << 20;
  // io_uring entries per directory and the most I/Os in flight on it; more wait in a queue of
  // ours, never in the caller. In [1, 4096].
  uint32_t queue_depth = 64;
  T2Durability durability = T2Durability::kFdatasync;
  // Where the RocksDB metadata lives; empty means "<directories[0]>/kvtier-t2-meta".
  std::string metadata_directory;
  // true: the slot file is allocated with fallocate at start, so a full disk shows at start and
  // never mid-write. false: a sparse file (for tests and benchmarks); ENOSPC then surfaces on
  // writes, where it stops admission.
  bool preallocate = true;
  // Memory that transfers should come from (the T1 segment); split into <= 1 GiB fixed buffers.
  // Transfers outside it still work, as plain (non-fixed) O_DIRECT reads and writes.
  std::vector<RegisteredRange> registered_ranges;
  // Threads that verify read payloads (XXH3-64) off the completion threads; 0 means one per CPU,
  // at most 8. At most 64.
  uint32_t verify_threads = 0;
  // While admission is stopped (disk full, failed metadata write), an Allocate at most this often
  // probes whether room came back: it reserves the next free slot's range with fallocate and
  // rewrites one metadata entry; on success admission resumes. 0 probes on every Allocate. A probe
  // of a full disk fails fast (one fallocate, one failed put), so a short interval costs little
  // and bounds how long admission stays off after room came back.
  uint32_t admission_probe_interval_ms = 200;

  // OK, or every problem, one per line, each naming its setting, e.g.
  // "t2.directories[1]: /data/x does not exist"; the code is the first problem's
  // (InvalidArgument, PermissionDenied or NotFound).
  absl::Status Validate() const;
  // The metadata directory after applying the default above.
  std::string MetadataDirectory() const;
  uint32_t SlotsPerDirectory() const { return static_cast<uint32_t>(capacity_bytes / slot_bytes); }
  // verify_threads after applying the default above.
  uint32_t VerifyThreads() const;
};

// OK if `path` is an existing directory this process may create files in; else NotFound,
// PermissionDenied or InvalidArgument, the message starting with `setting`.
absl::Status CheckT2Directory(const std::string& setting, const std::string& path);
// The directory t2.metadata_directory is created in ("." for a bare name, "/" at the root).
std::string MetadataParent(const std::string& metadata_directory);

}  // namespace kvtier
