#include "client/protocol/region_layout.h"

#include <fmt/format.h>

#include <bit>
#include <string>

namespace kvtier::protocol {
namespace {

uint64_t RoundUp(uint64_t v, uint64_t align) { return (v + align - 1) / align * align; }

absl::Status CheckEntries(const char* what, uint32_t entries) {
  if (entries < kMinRingEntries || entries > kMaxRingEntries || !std::has_single_bit(entries)) {
    return absl::InvalidArgumentError(fmt::format("{} = {}: must be a power of two in [{}, {}]",
                                                  what, entries, kMinRingEntries, kMaxRingEntries));
  }
  return absl::OkStatus();
}

absl::Status CheckArena(uint32_t arena_bytes) {
  if (arena_bytes < kRegionPage || arena_bytes > kMaxArenaBytes || arena_bytes % kRegionPage != 0) {
    return absl::InvalidArgumentError(
        fmt::format("arena_bytes = {}: must be a multiple of {} in [{}, {}]", arena_bytes,
                    kRegionPage, kRegionPage, kMaxArenaBytes));
  }
  return absl::OkStatus();
}

struct Part {
  const char* name;
  uint64_t offset;
  uint64_t bytes;
  uint64_t align;
};

absl::Status CheckPart(const Part& p, uint64_t region_bytes) {
  if (p.offset % p.align != 0) {
    return absl::InvalidArgumentError(
        fmt::format("layout: {} at offset {} is not {}-byte aligned", p.name, p.offset, p.align));
  }
  if (p.offset > region_bytes || p.bytes > region_bytes - p.offset) {
    return absl::InvalidArgumentError(
        fmt::format("layout: {} [{}, +{}) is outside the region of {} bytes", p.name, p.offset,
                    p.bytes, region_bytes));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<RegionLayout> ComputeLayout(uint32_t sq_entries, uint32_t cq_entries,
                                           uint32_t arena_bytes) {
  KVTIER_RETURN_IF_ERROR(CheckEntries("sq_entries", sq_entries));
  KVTIER_RETURN_IF_ERROR(CheckEntries("cq_entries", cq_entries));
  KVTIER_RETURN_IF_ERROR(CheckArena(arena_bytes));
  RegionLayout l{};
  l.sq_control = 0;
  l.cq_control = sizeof(RingControl);
  l.sq_records = kRegionPage;
  l.sq_entries = sq_entries;
  // Both offsets fit 32 bits: entries are at most kMaxRingEntries (2^16) records of 64 bytes,
  // so each ring's records end below 2^23 (checked above).
  l.cq_records = static_cast<uint32_t>(
      RoundUp(uint64_t{l.sq_records} + uint64_t{sq_entries} * kRecordBytes, kRegionPage));
  l.cq_entries = cq_entries;
  l.arena_offset = static_cast<uint32_t>(
      RoundUp(uint64_t{l.cq_records} + uint64_t{cq_entries} * kRecordBytes, kRegionPage));
  l.arena_bytes = arena_bytes;
  l.region_bytes = uint64_t{l.arena_offset} + arena_bytes;
  return l;
}

absl::Status ValidateLayout(const RegionLayout& l) {
  KVTIER_RETURN_IF_ERROR(CheckEntries("layout sq_entries", l.sq_entries));
  KVTIER_RETURN_IF_ERROR(CheckEntries("layout cq_entries", l.cq_entries));
  KVTIER_RETURN_IF_ERROR(CheckArena(l.arena_bytes));
  if (l.region_bytes % kRegionPage != 0) {
    return absl::InvalidArgumentError(fmt::format(
        "layout: region_bytes = {} is not a multiple of {}", l.region_bytes, kRegionPage));
  }
  const Part parts[] = {
      {"sq control", l.sq_control, sizeof(RingControl), kCacheLine},
      {"cq control", l.cq_control, sizeof(RingControl), kCacheLine},
      {"sq records", l.sq_records, uint64_t{l.sq_entries} * kRecordBytes, kCacheLine},
      {"cq records", l.cq_records, uint64_t{l.cq_entries} * kRecordBytes, kCacheLine},
      {"arena", l.arena_offset, l.arena_bytes, kRegionPage},
  };
  for (const Part& p : parts) KVTIER_RETURN_IF_ERROR(CheckPart(p, l.region_bytes));
  for (size_t i = 0; i < std::size(parts); ++i) {
    for (size_t j = i + 1; j < std::size(parts); ++j) {
      const Part& a = parts[i];
      const Part& b = parts[j];
      if (a.offset < b.offset + b.bytes && b.offset < a.offset + a.bytes) {
        return absl::InvalidArgumentError(fmt::format("layout: {} [{}, +{}) overlaps {} [{}, +{})",
                                                      a.name, a.offset, a.bytes, b.name, b.offset,
                                                      b.bytes));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace kvtier::protocol
