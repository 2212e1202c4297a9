// The safetensors reader on well-formed and hostile files: every bad size is a clear error naming
// the file and the tensor, never a read outside the mapping.
#include "engine/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/engine/safetensors_writer.h"

namespace kvtier::engine {
namespace {

using testing::F32Bytes;
using testing::HeaderOf;
using testing::TensorBytes;
using testing::WriteRaw;
using testing::WriteSafetensors;

class SafetensorsTest : public ::testing::Test {
 protected:
  std::string dir_ = testing::TempDir("safetensors");
  std::string path_ = dir_ + "/model.safetensors";

  // The error of opening path_ (which must fail).
  std::string OpenError() {
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path_);
    EXPECT_FALSE(file.ok());
    return file.ok() ? "" : std::string(file.status().message());
  }
  std::vector<TensorBytes> Two() {
    return {{"a", "F32", {2, 2}, F32Bytes({1, 2, 3, 4})}, {"b", "BF16", {3}, {0, 0, 1, 1, 2, 2}}};
  }
};

TEST_F(SafetensorsTest, ReadsTensorsInPlace) {
  WriteSafetensors(path_, Two());
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(path_);
  ASSERT_TRUE(file.ok()) << file.status();
  const TensorView& a = (*file)->tensors().at("a");
  EXPECT_EQ(a.dtype, "F32");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 2}));
  ASSERT_EQ(a.data.size(), 16u);
  float third;
  std::memcpy(&third, a.data.data() + 8, 4);
  EXPECT_EQ(third, 3.0f);
  EXPECT_EQ((*file)->tensors().at("b").data.size(), 6u);
  EXPECT_EQ((*file)->tensors().size(), 2u);  // __metadata__ is not a tensor
}

TEST_F(SafetensorsTest, MissingFileIsNotFound) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file = SafetensorsFile::Open(dir_ + "/nope");
  EXPECT_EQ(file.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(SafetensorsTest, TooShortForTheHeaderLength) {
  std::ofstream(path_) << "abc";
  EXPECT_EQ(OpenError(),
            path_ + ": 3 bytes, too short for a safetensors file (8-byte header length)");
}

TEST_F(SafetensorsTest, HeaderLengthPastTheEndOfTheFile) {
  WriteRaw(path_, "{}", {}, /*claimed_len=*/1000);
  EXPECT_NE(OpenError().find(": header length 1000 does not fit in the file (10 bytes)"),
            std::string::npos);
  WriteRaw(path_, "{}", {}, /*claimed_len=*/UINT64_MAX - 1);  // 8 + len would overflow
  EXPECT_NE(OpenError().find("does not fit in the file"), std::string::npos);
}

TEST_F(SafetensorsTest, HeaderNotJsonOrNotAnObject) {
  WriteRaw(path_, "{\"a\": ", {});
  EXPECT_EQ(OpenError().rfind(path_ + ": header is not valid JSON (", 0), 0u);
  WriteRaw(path_, "[1]", {});
  EXPECT_EQ(OpenError(), path_ + ": header is not a JSON object");
}

TEST_F(SafetensorsTest, TruncatedFileNamesTheTensorPastTheEnd) {
  std::vector<TensorBytes> t = Two();
  std::vector<uint8_t> data = t[0].bytes;  // b's 6 bytes are missing
  WriteRaw(path_, HeaderOf(t).dump(), data);
  EXPECT_EQ(OpenError(), path_ +
                             ": tensor \"b\": data_offsets [16,22] end past the data section (16 "
                             "bytes): truncated file?");
}

TEST_F(SafetensorsTest, ShapeAndDtypeMustMatchTheByteSize) {
  std::vector<TensorBytes> t = Two();
  nlohmann::json header = HeaderOf(t);
  header["a"]["shape"] = {2, 3};
  WriteRaw(path_, header.dump(), F32Bytes({1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 0}));
  EXPECT_EQ(OpenError(), path_ +
                             ": tensor \"a\": dtype F32 shape [2,3] needs 24 bytes, but "
                             "data_offsets [0,16] hold 16");
}

TEST_F(SafetensorsTest, ShapeThatOverflowsIsRefused) {
  nlohmann::json header = HeaderOf(Two());
  header["a"]["shape"] = {uint64_t{1} << 62, 8};
  WriteRaw(path_, header.dump(), std::vector<uint8_t>(22));
  EXPECT_NE(OpenError().find("tensor \"a\": shape [4611686018427387904,8] overflows"),
            std::string::npos);
}

TEST_F(SafetensorsTest, OverlappingRangesAreRefused) {
  nlohmann::json header = HeaderOf(Two());
  header["b"]["data_offsets"] = {10, 16};  // inside a's [0, 16)
  WriteRaw(path_, header.dump(), std::vector<uint8_t>(22));
  EXPECT_EQ(OpenError(), path_ + ": tensors \"a\" [0, 16) and \"b\" [10, 16) overlap");
}

TEST_F(SafetensorsTest, MalformedEntriesNameTheTensor) {
  const std::vector<std::pair<nlohmann::json, std::string>> cases = {
      {{{"x", 5}}, "tensor \"x\": expected an object, got 5"},
      {{{"x", {{"shape", {1}}, {"data_offsets", {0, 4}}}}}, "tensor \"x\": \"dtype\" missing"},
      {{{"x", {{"dtype", "Q4"}, {"shape", {1}}, {"data_offsets", {0, 4}}}}},
       "tensor \"x\": unknown dtype \"Q4\""},
      {{{"x", {{"dtype", "F32"}, {"shape", {-1}}, {"data_offsets", {0, 4}}}}},
       "tensor \"x\": shape [-1] is not a list of sizes"},
      {{{"x", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {4, 0}}}}},
       "tensor \"x\": data_offsets [4,0] are not [begin, end] with begin <= end"},
      {{{"x", {{"dtype", "F32"}, {"shape", {1}}, {"data_offsets", {0}}}}},
       "tensor \"x\": \"data_offsets\" missing or not [begin, end]"},
  };
  for (const auto& [header, want] : cases) {
    WriteRaw(path_, header.dump(), std::vector<uint8_t>(8));
    EXPECT_NE(OpenError().find(want), std::string::npos) << want;
  }
}

TEST_F(SafetensorsTest, CheckpointReadsShardsThroughTheIndex) {
  std::vector<TensorBytes> t = Two();
  WriteSafetensors(dir_ + "/model-00001-of-00002.safetensors", {t[0]});
  WriteSafetensors(dir_ + "/model-00002-of-00002.safetensors", {t[1]});
  std::ofstream(dir_ + "/model.safetensors.index.json")
      << R"({"metadata": {}, "weight_map": {"a": "model-00001-of-00002.safetensors",
                                           "b": "model-00002-of-00002.safetensors"}})";
  std::filesystem::remove(path_);
  absl::StatusOr<Checkpoint> ckpt = Checkpoint::Open(dir_);
  ASSERT_TRUE(ckpt.ok()) << ckpt.status();
  EXPECT_EQ(ckpt->size(), 2u);
  absl::StatusOr<const TensorView*> b = ckpt->Find("b");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ((*b)->dtype, "BF16");
  EXPECT_EQ(*(*b)->file, dir_ + "/model-00002-of-00002.safetensors");
  EXPECT_EQ(ckpt->Find("c").status().message(),
            dir_ + "/model.safetensors.index.json: tensor \"c\" is missing");
}

TEST_F(SafetensorsTest, IndexErrorsNameTheIndex) {
  WriteSafetensors(dir_ + "/shard.safetensors", {Two()[0]});
  const std::string index = dir_ + "/model.safetensors.index.json";
  auto error = [&](const std::string& text) {
    std::ofstream(index) << text;
    absl::StatusOr<Checkpoint> ckpt = Checkpoint::Open(dir_);
    EXPECT_FALSE(ckpt.ok());
    return std::string(ckpt.status().message());
  };
  EXPECT_EQ(error(R"({"weight_map": {"b": "shard.safetensors"}})"),
            index + ": tensor \"b\" is mapped to shard.safetensors, which does not hold it");
  EXPECT_EQ(error(R"({"weight_map": {"a": "../model.safetensors"}})"),
            index +
                ": \"weight_map\" maps tensor \"a\" to \"../model.safetensors\"; expected a file "
                "name in the model directory");
  EXPECT_EQ(error(R"({"metadata": {}})"),
            index + ": field \"weight_map\" is missing, empty or not an object");
  EXPECT_NE(error(R"({"weight_map": {"a": "gone.safetensors"}})")
                .find("cannot open " + dir_ + "/gone.safetensors"),
            std::string::npos);
}

TEST_F(SafetensorsTest, DirectoryWithoutWeightsIsNotFound) {
  absl::StatusOr<Checkpoint> ckpt = Checkpoint::Open(dir_);
  EXPECT_EQ(ckpt.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ckpt.status().message(),
            dir_ + ": no model.safetensors or model.safetensors.index.json");
}

}  // namespace
}  // namespace kvtier::engine
