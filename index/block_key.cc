#include "index/block_key.h"

#include <cstring>

#include "absl/strings/escaping.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvtier {
namespace {

BlockKey FromHash(XXH128_hash_t h) { return BlockKey{h.low64, h.high64}; }

void Store64(uint8_t* out, uint64_t v) {
  for (int i = 0; i < 8; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

void Store32(uint8_t* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<uint8_t>(v >> (8 * i));
}

constexpr bool kLittleEndian = __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__;

void PutKey(const BlockKey& k, uint8_t* out) {
  Store64(out, k.lo);
  Store64(out + 8, k.hi);
}

}  // namespace

std::array<uint8_t, 16> BlockKey::Bytes() const {
  std::array<uint8_t, 16> out;
  PutKey(*this, out.data());
  return out;
}

std::string BlockKey::ToHex() const {
  auto b = Bytes();
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(b.data()), b.size()));
}

BlockKey ChainTokenBlock(const BlockKey& parent, absl::Span<const uint32_t> tokens) {
  XXH3_state_t state;
  XXH3_128bits_reset(&state);
  uint8_t head[16];
  PutKey(parent, head);
  XXH3_128bits_update(&state, head, sizeof(head));
  if constexpr (kLittleEndian) {
    XXH3_128bits_update(&state, tokens.data(), tokens.size() * sizeof(uint32_t));
  } else {
    for (uint32_t t : tokens) {
      uint8_t le[4];
      Store32(le, t);
      XXH3_128bits_update(&state, le, sizeof(le));
    }
  }
  return FromHash(XXH3_128bits_digest(&state));
}

BlockKey ChainEngineHash(const BlockKey& parent, uint64_t engine_hash) {
  uint8_t buf[24];
  PutKey(parent, buf);
  Store64(buf + 16, engine_hash);
  return FromHash(XXH3_128bits(buf, sizeof(buf)));
}

std::vector<BlockKey> TokenBlockKeys(const BlockKey& parent, absl::Span<const uint32_t> tokens,
                                     uint32_t block_tokens) {
  std::vector<BlockKey> keys;
  if (block_tokens == 0) return keys;
  size_t n = tokens.size() / block_tokens;
  keys.reserve(n);
  BlockKey prev = parent;
  for (size_t i = 0; i < n; ++i) {
    prev = ChainTokenBlock(prev, tokens.subspan(i * block_tokens, block_tokens));
    keys.push_back(prev);
  }
  return keys;
}

}  // namespace kvtier
