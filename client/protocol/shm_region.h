// ShmRegion: one client's shared region (region_layout.h), a memfd mapped by the daemon and by
// that client: the submission and completion rings and the argument/result arena.
//
// The daemon creates it (Create) and passes fd() to the client with Welcome; the client maps the
// fd it received (Map). Create seals the memfd against shrinking and growing (F_SEAL_SHRINK,
// F_SEAL_GROW, F_SEAL_SEAL) before anyone else sees it: otherwise a client could ftruncate it and
// make the daemon's next access to the region fault (SIGBUS). Map checks the fd's size against
// the layout, so a short fd is an error, not a later fault.
//
// Ownership: the object owns its mapping and its fd. Thread-safety: the accessors are const and
// may be called from any thread; what is done with the memory is the rings' and codec's business.
#pragma once

#include <cstddef>
#include <memory>

#include "client/protocol/record_codec.h"
#include "client/protocol/region_layout.h"
#include "client/protocol/spsc_ring.h"
#include "client/protocol/unique_fd.h"
#include "common/status.h"

namespace kvtier::protocol {

class ShmRegion {
 public:
  // Daemon side: a new zeroed, sealed memfd of layout.region_bytes, mapped. `layout` must pass
  // ValidateLayout (InvalidArgument otherwise); Internal on a system call failure.
  static absl::StatusOr<std::unique_ptr<ShmRegion>> Create(const RegionLayout& layout);
  // Client side: maps `fd` (a region received in Welcome) with `layout` (from DecodeWelcome).
  // InvalidArgument if the fd is smaller than layout.region_bytes.
  static absl::StatusOr<std::unique_ptr<ShmRegion>> Map(UniqueFd fd, const RegionLayout& layout);
  ~ShmRegion();
  ShmRegion(const ShmRegion&) = delete;
  ShmRegion& operator=(const ShmRegion&) = delete;

  const RegionLayout& layout() const { return layout_; }
  int fd() const { return fd_.get(); }
  std::byte* base() const { return base_; }

  RingMemory submission() const;
  RingMemory completion() const;
  ArenaView arena() const { return ArenaView{base_ + layout_.arena_offset, layout_.arena_bytes}; }

 private:
  ShmRegion(UniqueFd fd, std::byte* base, const RegionLayout& layout)
      : fd_(std::move(fd)), base_(base), layout_(layout) {}
  static absl::StatusOr<std::unique_ptr<ShmRegion>> MapFd(UniqueFd fd, const RegionLayout& layout);

  UniqueFd fd_;
  std::byte* base_;
  const RegionLayout layout_;  // private copy: never re-read from shared memory
};

}  // namespace kvtier::protocol
