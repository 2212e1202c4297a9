// Loading weights: dtype conversion, the per-architecture tensor list, and checkpoints that do not
// fit their config (a missing or mis-shaped tensor, an unsupported dtype) failing with the file and
// tensor named; a sharded checkpoint loading the same model as a single file.
#include "engine/weights.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <limits>

#include "engine/cpu_model.h"
#include "engine/cpu_sequence.h"
#include "tests/engine/safetensors_writer.h"

namespace kvtier::engine {
namespace {

namespace fs = std::filesystem;
using testing::TensorBytes;
using testing::WriteSafetensors;

std::string GoldenDir(const std::string& name) {
  return std::string(KVTIER_SOURCE_DIR) + "/tests/engine/data/models/" + name;
}

// Every tensor of a golden model's checkpoint, as bytes.
std::vector<TensorBytes> TensorsOf(const std::string& name) {
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> file =
      SafetensorsFile::Open(GoldenDir(name) + "/model.safetensors");
  EXPECT_TRUE(file.ok()) << file.status();
  std::vector<TensorBytes> out;
  for (const auto& [tensor, view] : (*file)->tensors()) {
    const auto* p = reinterpret_cast<const uint8_t*>(view.data.data());
    out.push_back({tensor, view.dtype, view.shape, {p, p + view.data.size()}});
  }
  return out;
}

// A copy of a golden model's directory (config files only) in a fresh temp dir.
std::string CopyConfig(const std::string& name, const std::string& tag) {
  const std::string dir = testing::TempDir(tag);
  fs::copy_file(GoldenDir(name) + "/config.json", dir + "/config.json");
  fs::copy_file(GoldenDir(name) + "/generation_config.json", dir + "/generation_config.json");
  return dir;
}

TEST(WeightsTest, ConvertsHalfAndBfloat16Exactly) {
  const std::vector<uint16_t> f16 = {0x3c00, 0xc000, 0x0001, 0x03ff, 0x7bff, 0x7c00, 0x8000};
  const std::vector<uint16_t> bf16 = {0x3f80, 0xc0a0, 0x0001, 0xff80};
  auto view = [](const std::string& dtype, const std::vector<uint16_t>& v) {
    return TensorView{dtype,
                      {static_cast<int64_t>(v.size())},
                      std::as_bytes(std::span<const uint16_t>(v)),
                      nullptr};
  };
  std::vector<float> out(7);
  ASSERT_TRUE(ToFloat32("h", view("F16", f16), out.data()).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -2.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -24));     // smallest subnormal
  EXPECT_EQ(out[3], std::ldexp(1023.0f, -24));  // largest subnormal
  EXPECT_EQ(out[4], 65504.0f);                  // largest normal
  EXPECT_EQ(out[5], std::numeric_limits<float>::infinity());
  EXPECT_TRUE(std::signbit(out[6]) && out[6] == 0.0f);  // -0
  ASSERT_TRUE(ToFloat32("b", view("BF16", bf16), out.data()).ok());
  EXPECT_EQ(out[0], 1.0f);
  EXPECT_EQ(out[1], -5.0f);
  EXPECT_EQ(out[2], std::ldexp(1.0f, -133));  // bf16 subnormals are float subnormals
  EXPECT_EQ(out[3], -std::numeric_limits<float>::infinity());
}

TEST(WeightsTest, UnsupportedDtypeNamesFileAndTensor) {
  const std::string file = "dir/model.safetensors";
  const std::vector<uint8_t> bytes(8);
  TensorView view{"I64", {1}, std::as_bytes(std::span<const uint8_t>(bytes)), &file};
  float out;
  EXPECT_EQ(ToFloat32("model.norm.weight", view, &out).message(),
            "dir/model.safetensors: tensor \"model.norm.weight\" has dtype I64; expected BF16, "
            "F16 or F32");
}

TEST(WeightsTest, ExpectedTensorsFollowTheArchitecture) {
  // transformers 5.17 reported loading 21 tensors for the llama3 model; qwen2 adds 3 biases per
  // layer, qwen3 2 norms per layer and no lm_head (tied).
  const std::vector<std::pair<std::string, size_t>> counts = {
      {"llama3", 21}, {"qwen2", 27}, {"qwen3", 24}, {"mistral", 21}};
  for (const auto& [name, count] : counts) {
    absl::StatusOr<ModelConfig> config = LoadModelConfig(GoldenDir(name));
    ASSERT_TRUE(config.ok()) << config.status();
    const std::vector<WeightSpec> specs = ExpectedWeights(*config);
    EXPECT_EQ(specs.size(), count) << name;
    EXPECT_EQ(specs.size(), TensorsOf(name).size()) << name << ": exactly what transformers saved";
  }
}

TEST(WeightsTest, MissingTensorNamesFileAndTensor) {
  const std::string dir = CopyConfig("llama3", "missing");
  std::vector<TensorBytes> tensors = TensorsOf("llama3");
  std::erase_if(tensors, [](const TensorBytes& t) {
    return t.name == "model.layers.1.mlp.down_proj.weight";
  });
  WriteSafetensors(dir + "/model.safetensors", tensors);
  absl::StatusOr<std::unique_ptr<CpuModel>> model = CpuModel::Load(dir);
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(model.status().message(),
            dir + "/model.safetensors: tensor \"model.layers.1.mlp.down_proj.weight\" is missing");
}

TEST(WeightsTest, MisShapedTensorNamesFileTensorAndShapes) {
  const std::string dir = CopyConfig("llama3", "misshaped");
  std::string config;
  {
    std::ifstream in(dir + "/config.json");
    config.assign(std::istreambuf_iterator<char>(in), {});
  }
  config.replace(config.find("\"intermediate_size\": 128"), 24, "\"intermediate_size\": 96");
  std::ofstream(dir + "/config.json", std::ios::trunc) << config;
  WriteSafetensors(dir + "/model.safetensors", TensorsOf("llama3"));
  absl::StatusOr<std::unique_ptr<CpuModel>> model = CpuModel::Load(dir);
  EXPECT_EQ(model.status().message(),
            dir +
                "/model.safetensors: tensor \"model.layers.0.mlp.gate_proj.weight\" has shape "
                "[128, 64]; the config implies [96, 64]");
}

TEST(WeightsTest, ShardedCheckpointLoadsTheSameModel) {
  const std::string dir = CopyConfig("qwen3", "sharded");
  std::vector<TensorBytes> tensors = TensorsOf("qwen3");
  const size_t half = tensors.size() / 2;
  nlohmann::json map;
  for (size_t i = 0; i < tensors.size(); ++i) {
    map[tensors[i].name] =
        i < half ? "model-00001-of-00002.safetensors" : "model-00002-of-00002.safetensors";
  }
  WriteSafetensors(dir + "/model-00001-of-00002.safetensors",
                   {tensors.begin(), tensors.begin() + half});
  WriteSafetensors(dir + "/model-00002-of-00002.safetensors",
                   {tensors.begin() + half, tensors.end()});
  std::ofstream(dir + "/model.safetensors.index.json")
      << nlohmann::json{{"metadata", {{"total_size", 0}}}, {"weight_map", map}}.dump();
  absl::StatusOr<std::unique_ptr<CpuModel>> sharded = CpuModel::Load(dir);
  absl::StatusOr<std::unique_ptr<CpuModel>> single = CpuModel::Load(GoldenDir("qwen3"));
  ASSERT_TRUE(sharded.ok()) << sharded.status();
  ASSERT_TRUE(single.ok()) << single.status();
  const std::vector<int32_t> prompt = {5, 77, 300, 12, 9, 400};
  std::vector<float> a, b;
  CpuKvPool pool_a((*sharded)->KvGeometry(16), 4), pool_b((*single)->KvGeometry(16), 4);
  CpuSequence seq_a(**sharded, pool_a), seq_b(**single, pool_b);
  ASSERT_TRUE(seq_a.Append(prompt, true, &a).ok());
  ASSERT_TRUE(seq_b.Append(prompt, true, &b).ok());
  EXPECT_EQ(a, b);
}

}  // namespace
}  // namespace kvtier::engine
