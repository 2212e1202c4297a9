// The layout of one client's shared region (wire_format.h RegionLayout): where its two rings'
// control words, their records and its argument/result arena are. The daemon computes it with
// ComputeLayout; a client checks the one it receives in Welcome with ValidateLayout before mapping
// anything, since nothing it reads from the socket is trusted either.
//
//   [0, 128)                 submission ring control (RingControl)
//   [128, 256)               completion ring control
//   [4096, +sq_entries*64)   submission records, then completion records (each page-aligned)
//   [arena_offset, +arena)   the arena, page-aligned; region_bytes = arena_offset + arena_bytes
//
// Pure functions; thread-safe.
#pragma once

#include <cstdint>

#include "client/protocol/wire_format.h"
#include "common/status.h"

namespace kvtier::protocol {

inline constexpr uint32_t kRegionPage = 4096;
inline constexpr uint32_t kDefaultRingEntries = 256;
inline constexpr uint32_t kDefaultArenaBytes = 2u << 20;

// The layout for these sizes. Errors: InvalidArgument naming a size that is not a power of two in
// [kMinRingEntries, kMaxRingEntries], or an arena that is not a multiple of 4096 in
// [4096, kMaxArenaBytes].
absl::StatusOr<RegionLayout> ComputeLayout(uint32_t sq_entries, uint32_t cq_entries,
                                           uint32_t arena_bytes);

// OK when `layout` is one a daemon could have computed: sizes in range, every part inside
// region_bytes, aligned, and no two parts overlapping. InvalidArgument naming the first fault.
absl::Status ValidateLayout(const RegionLayout& layout);

}  // namespace kvtier::protocol
