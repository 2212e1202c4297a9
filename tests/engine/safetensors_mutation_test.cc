// Seeded mutations of a valid safetensors file (bytes of the header and its length changed,
// truncations, digits altered in the JSON) must each either open with every tensor's bytes inside
// the file or fail with an InvalidArgument naming the file; never crash or read past the mapping
// (run it under the asan preset to check the last part).
#include <gtest/gtest.h>

#include <iostream>
#include <random>

#include "engine/safetensors.h"
#include "tests/engine/safetensors_writer.h"

namespace kvtier::engine {
namespace {

using testing::F32Bytes;
using testing::TensorBytes;

std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

void Mutate(std::vector<uint8_t>& file, std::mt19937& rng) {
  std::uniform_int_distribution<int> kind(0, 3);
  const size_t header_end = std::min<size_t>(file.size(), 8 + file[0] + 256 * file[1]);
  switch (kind(rng)) {
    case 0: {  // a random byte anywhere in the length or header
      file[std::uniform_int_distribution<size_t>(0, header_end - 1)(rng)] =
          static_cast<uint8_t>(rng());
      break;
    }
    case 1: {  // a digit in the header changed (offsets and shapes are digits)
      std::vector<size_t> digits;
      for (size_t i = 8; i < header_end; ++i) {
        if (file[i] >= '0' && file[i] <= '9') digits.push_back(i);
      }
      if (!digits.empty()) file[digits[rng() % digits.size()]] = '0' + rng() % 10;
      break;
    }
    case 2:  // truncated
      file.resize(std::uniform_int_distribution<size_t>(0, file.size())(rng));
      break;
    default: {  // the header length changed by a little
      uint64_t len;
      std::memcpy(&len, file.data(), 8);
      len += static_cast<int>(rng() % 9) - 4;
      std::memcpy(file.data(), &len, 8);
    }
  }
}

TEST(SafetensorsMutationTest, EveryMutationOpensCleanlyOrFailsNamingTheFile) {
  const std::string dir = testing::TempDir("mutation");
  const std::string valid = dir + "/valid.safetensors";
  testing::WriteSafetensors(valid, {{"a", "F32", {2, 3}, F32Bytes({1, 2, 3, 4, 5, 6})},
                                    {"b", "BF16", {4}, std::vector<uint8_t>(8, 1)},
                                    {"c", "I64", {1, 1}, std::vector<uint8_t>(8, 2)},
                                    {"empty", "F16", {0, 5}, {}}});
  const std::vector<uint8_t> original = ReadAll(valid);
  ASSERT_LT(original[1], 2);  // the header is under 512 bytes (Mutate reads two length bytes)
  std::mt19937 rng(20261124);
  const std::string path = dir + "/mutated.safetensors";
  int opened = 0;
  for (int round = 0; round < 1000; ++round) {
    std::vector<uint8_t> file = original;
    for (int m = 1 + round % 3; m > 0 && file.size() >= 8; --m) Mutate(file, rng);
    std::ofstream(path, std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(file.data()),
               static_cast<std::streamsize>(file.size()));
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> parsed = SafetensorsFile::Open(path);
    if (!parsed.ok()) {
      ASSERT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << parsed.status();
      ASSERT_EQ(parsed.status().message().rfind(path + ": ", 0), 0u) << parsed.status();
      continue;
    }
    ++opened;
    uint64_t sum = 0;
    for (const auto& [name, view] : (*parsed)->tensors()) {
      for (std::byte b : view.data) sum += static_cast<uint8_t>(b);  // touch every byte
    }
    EXPECT_GE(sum, 0u);
  }
  std::cout << opened << " of 1000 mutated files opened\n";
  EXPECT_GT(opened, 0);  // some mutations (e.g. a digit replaced by itself) stay valid
}

}  // namespace
}  // namespace kvtier::engine
