// The bytes of one block in the remote store (DESIGN.md "The remote tier"): a fixed 48-byte header,
// then the payload. Every read checks the header against the key asked for and the payload against
// the header's XXH3-64, so a value that was corrupted, truncated, written by something else, or
// stored under another key is never served (remote_store.h counts it and answers a miss).
//
//   offset  bytes  field (little-endian)
//        0      4  magic "KVTR" (0x5254564B)
//        4      2  format version (1)
//        6      2  header bytes (48)
//        8     16  block key, BlockKey::Bytes() (the namespace-scoped key)
//       24      8  namespace id (BlockRecord::namespace_id)
//       32      4  payload bytes
//       36      4  reserved, 0
//       40      8  XXH3-64 of the payload (BlockRecord::checksum)
//       48      -  payload
//
// Changing any of this bumps kRemoteValueVersion; a reader refuses other versions (a miss).
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "common/status.h"
#include "tiers/storage_tier.h"

namespace kvtier {

inline constexpr uint32_t kRemoteValueMagic = 0x5254564B;  // "KVTR" as little-endian bytes
inline constexpr uint16_t kRemoteValueVersion = 1;
inline constexpr size_t kRemoteHeaderBytes = 48;

// Writes the header of `record` into out[0, kRemoteHeaderBytes).
void EncodeRemoteHeader(const BlockRecord& record, uint8_t* out);

// The record in `value`'s header if it is a version-1 value of exactly header + payload bytes for
// `key` and `namespace_id`; DataLoss naming the first thing wrong otherwise. Does not hash the
// payload: the caller does, while copying it out.
absl::StatusOr<BlockRecord> DecodeRemoteHeader(std::string_view value, const BlockKey& key,
                                               uint64_t namespace_id);
// The same check from the value's first kRemoteHeaderBytes (`header`, exactly that long) and its
// whole length `value_bytes`, for a reader that has the payload elsewhere (a GET read straight
// into the caller's buffer).
absl::StatusOr<BlockRecord> DecodeRemoteHeader(std::string_view header, uint64_t value_bytes,
                                               const BlockKey& key, uint64_t namespace_id);

}  // namespace kvtier
