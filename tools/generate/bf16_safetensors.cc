#include "tools/generate/bf16_safetensors.h"

#include <fmt/format.h>

#include <bit>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

namespace kvtier::generate {
namespace {

int64_t Elements(const Bf16Tensor& t) {
  int64_t n = 1;
  for (int64_t d : t.shape) n *= d;
  return n;
}

std::string Header(const std::vector<Bf16Tensor>& tensors) {
  nlohmann::ordered_json header = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t offset = 0;
  for (const Bf16Tensor& t : tensors) {
    const uint64_t bytes = static_cast<uint64_t>(Elements(t)) * 2;
    header[t.name] = {
        {"dtype", "BF16"}, {"shape", t.shape}, {"data_offsets", {offset, offset + bytes}}};
    offset += bytes;
  }
  std::string text = header.dump();
  // The data section starts 8-aligned, as the safetensors library writes it (padded with spaces).
  text.append((8 - text.size() % 8) % 8, ' ');
  return text;
}

}  // namespace

uint16_t ToBf16(float value) {
  const uint32_t bits = std::bit_cast<uint32_t>(value);
  if ((bits & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((bits >> 16) | 0x40);
  const uint32_t rounding = 0x7fffu + ((bits >> 16) & 1u);
  return static_cast<uint16_t>((bits + rounding) >> 16);
}

absl::Status WriteBf16Safetensors(
    const std::string& path, const std::vector<Bf16Tensor>& tensors,
    const std::function<void(size_t index, std::vector<float>& values)>& fill) {
  static_assert(std::endian::native == std::endian::little, "safetensors is little-endian");
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) {
    return absl::InternalError(fmt::format("{}: cannot create: {}", path, std::strerror(errno)));
  }
  const std::string header = Header(tensors);
  const uint64_t length = header.size();
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  std::vector<float> values;
  std::vector<uint16_t> bf16;
  for (size_t i = 0; i < tensors.size(); ++i) {
    values.assign(static_cast<size_t>(Elements(tensors[i])), 0.0f);
    fill(i, values);
    bf16.resize(values.size());
    for (size_t j = 0; j < values.size(); ++j) bf16[j] = ToBf16(values[j]);
    out.write(reinterpret_cast<const char*>(bf16.data()),
              static_cast<std::streamsize>(bf16.size() * 2));
  }
  out.close();
  if (!out) {
    return absl::InternalError(fmt::format("{}: write failed: {}", path, std::strerror(errno)));
  }
  return absl::OkStatus();
}

}  // namespace kvtier::generate
