#include "tiers/remote/remote_value.h"

#include <fmt/format.h>

#include <array>
#include <bit>
#include <cstring>

namespace kvtier {
namespace {

template <typename T>
void Put(uint8_t* out, size_t offset, T value) {
  static_assert(std::endian::native == std::endian::little, "the value format is little-endian");
  std::memcpy(out + offset, &value, sizeof(T));
}

template <typename T>
T Get(std::string_view value, size_t offset) {
  T v;
  std::memcpy(&v, value.data() + offset, sizeof(T));
  return v;
}

}  // namespace

void EncodeRemoteHeader(const BlockRecord& record, uint8_t* out) {
  Put<uint32_t>(out, 0, kRemoteValueMagic);
  Put<uint16_t>(out, 4, kRemoteValueVersion);
  Put<uint16_t>(out, 6, static_cast<uint16_t>(kRemoteHeaderBytes));
  const std::array<uint8_t, 16> key = record.key.Bytes();
  std::memcpy(out + 8, key.data(), key.size());
  Put<uint64_t>(out, 24, record.namespace_id);
  Put<uint32_t>(out, 32, record.payload_bytes);
  Put<uint32_t>(out, 36, 0);
  Put<uint64_t>(out, 40, record.checksum);
}

absl::StatusOr<BlockRecord> DecodeRemoteHeader(std::string_view value, const BlockKey& key,
                                               uint64_t namespace_id) {
  return DecodeRemoteHeader(value.substr(0, kRemoteHeaderBytes), value.size(), key, namespace_id);
}

absl::StatusOr<BlockRecord> DecodeRemoteHeader(std::string_view value, uint64_t value_bytes,
                                               const BlockKey& key, uint64_t namespace_id) {
  if (value.size() != kRemoteHeaderBytes || value_bytes < kRemoteHeaderBytes) {
    return absl::DataLossError(fmt::format("value of {} bytes is shorter than the {}-byte header",
                                           value_bytes, kRemoteHeaderBytes));
  }
  if (Get<uint32_t>(value, 0) != kRemoteValueMagic) {
    return absl::DataLossError("value does not start with the kvtier magic");
  }
  if (Get<uint16_t>(value, 4) != kRemoteValueVersion ||
      Get<uint16_t>(value, 6) != kRemoteHeaderBytes) {
    return absl::DataLossError(fmt::format("value format {} with a {}-byte header is not {}/{}",
                                           Get<uint16_t>(value, 4), Get<uint16_t>(value, 6),
                                           kRemoteValueVersion, kRemoteHeaderBytes));
  }
  const std::array<uint8_t, 16> want = key.Bytes();
  if (std::memcmp(value.data() + 8, want.data(), want.size()) != 0) {
    return absl::DataLossError("value belongs to another block key");
  }
  BlockRecord record;
  record.key = key;
  record.namespace_id = Get<uint64_t>(value, 24);
  record.payload_bytes = Get<uint32_t>(value, 32);
  record.checksum = Get<uint64_t>(value, 40);
  if (record.namespace_id != namespace_id) {
    return absl::DataLossError(fmt::format("value belongs to namespace {:016x}, not {:016x}",
                                           record.namespace_id, namespace_id));
  }
  if (value_bytes - kRemoteHeaderBytes != record.payload_bytes || Get<uint32_t>(value, 36) != 0) {
    return absl::DataLossError(
        fmt::format("value of {} bytes does not hold the {} payload bytes its header names",
                    value_bytes, record.payload_bytes));
  }
  return record;
}

}  // namespace kvtier
