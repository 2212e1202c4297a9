// Test-only: writes safetensors files (and hostile variants of them) the way the format specifies,
// so the loader's checks can be driven with real files.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

namespace kvtier::engine::testing {

struct TensorBytes {
  std::string name;
  std::string dtype;  // "F32", "BF16", ...
  std::vector<int64_t> shape;
  std::vector<uint8_t> bytes;
};

inline std::vector<uint8_t> F32Bytes(const std::vector<float>& values) {
  std::vector<uint8_t> bytes(values.size() * 4);
  std::memcpy(bytes.data(), values.data(), bytes.size());
  return bytes;
}

// The header JSON for `tensors` laid out back to back.
inline nlohmann::json HeaderOf(const std::vector<TensorBytes>& tensors) {
  nlohmann::json header = {{"__metadata__", {{"format", "pt"}}}};
  uint64_t offset = 0;
  for (const TensorBytes& t : tensors) {
    header[t.name] = {{"dtype", t.dtype},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  return header;
}

// Writes 8-byte length, `header` text, then `data`.
inline void WriteRaw(const std::string& path, const std::string& header,
                     const std::vector<uint8_t>& data, uint64_t claimed_len = UINT64_MAX) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  const uint64_t len = claimed_len == UINT64_MAX ? header.size() : claimed_len;
  out.write(reinterpret_cast<const char*>(&len), 8);
  out << header;
  out.write(reinterpret_cast<const char*>(data.data()), static_cast<std::streamsize>(data.size()));
}

inline void WriteSafetensors(const std::string& path, const std::vector<TensorBytes>& tensors) {
  std::vector<uint8_t> data;
  for (const TensorBytes& t : tensors) data.insert(data.end(), t.bytes.begin(), t.bytes.end());
  WriteRaw(path, HeaderOf(tensors).dump(), data);
}

// A fresh empty directory under the test temp dir.
inline std::string TempDir(const std::string& name) {
  const std::string dir =
      ::testing::TempDir() + "kvtier_engine_" + name + "_" + std::to_string(::getpid());
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace kvtier::engine::testing
