// Block keys: the 128-bit names of cached KV blocks (DESIGN.md "Words").
//
//   key[-1] = XXH3_128(canonical namespace description)       (the namespace root)
//   key[i]  = XXH3_128(bytes(key[i-1]) ‖ token ids of block i as little-endian uint32)
//
// bytes(key) is the 16-byte little-endian form: `lo` as 8 little-endian bytes, then `hi`. No seeds,
// no process state: the same tokens after the same prefix give the same key in every process, on
// every host, in every run. tests/index/block_key_test.cc pins exact values; changing any of this
// changes every key on disk and must bump the namespace version string in namespace.cc.
//
// Thread-safety: all functions are pure.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"

namespace kvtier {

struct BlockKey {
  uint64_t lo = 0;  // low 64 bits of the XXH3-128 value
  uint64_t hi = 0;  // high 64 bits

  friend bool operator==(const BlockKey& a, const BlockKey& b) {
    return a.lo == b.lo && a.hi == b.hi;
  }
  friend bool operator!=(const BlockKey& a, const BlockKey& b) { return !(a == b); }

  template <typename H>
  friend H AbslHashValue(H h, const BlockKey& k) {
    return H::combine(std::move(h), k.lo, k.hi);
  }

  // The canonical 16-byte form described above.
  std::array<uint8_t, 16> Bytes() const;
  // 32 lowercase hex digits of Bytes(), for logs and golden tests.
  std::string ToHex() const;
};

// key = XXH3_128(bytes(parent) ‖ tokens as little-endian uint32). `tokens` is one whole block.
BlockKey ChainTokenBlock(const BlockKey& parent, absl::Span<const uint32_t> tokens);

// key = XXH3_128(bytes(parent) ‖ engine_hash as 8 little-endian bytes), for engines that hash their
// own blocks. A namespace uses either token keys or engine-hash keys, never both
// (Namespace::key_source is part of the root, so the two can never collide).
BlockKey ChainEngineHash(const BlockKey& parent, uint64_t engine_hash);

// Keys of the full blocks of `tokens` (a trailing partial block has no key), chained from `parent`
// (the namespace root for a sequence's first block). block_tokens must be > 0.
std::vector<BlockKey> TokenBlockKeys(const BlockKey& parent, absl::Span<const uint32_t> tokens,
                                     uint32_t block_tokens);

}  // namespace kvtier
