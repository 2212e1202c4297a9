#include "engine/model_config.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <string>

namespace kvtier::replay {
namespace {

// `kvtier replay --model` sizes blocks with the engine's parser of config.json.
using engine::LoadModelShape;
using engine::ModelShape;

std::string ModelPath(const std::string& name) {
  return KVTIER_SOURCE_DIR "/configs/models/" + name + ".json";
}

std::string WriteModel(const std::string& content) {
  std::string path =
      ::testing::TempDir() + "model_config_test_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << content;
  return path;
}

std::string ErrorOf(const std::string& content) {
  absl::StatusOr<ModelShape> shape = LoadModelShape(WriteModel(content));
  EXPECT_FALSE(shape.ok());
  return std::string(shape.status().message());
}

TEST(ModelConfigTest, ShippedModelsHaveTheirRealKvSizes) {
  struct Expected {
    const char* name;
    uint32_t layers, kv_heads, head_dim;
    uint64_t bytes_per_token;
  };
  for (const Expected& e :
       {Expected{"llama-3.1-8b", 32, 8, 128, 128 * 1024},
        Expected{"llama-3.1-70b", 80, 8, 128, 320 * 1024},
        Expected{"qwen2.5-7b", 28, 4, 128, 56 * 1024}, Expected{"qwen3-8b", 36, 8, 128, 144 * 1024},
        Expected{"mistral-7b", 32, 8, 128, 128 * 1024}}) {
    absl::StatusOr<ModelShape> shape = LoadModelShape(ModelPath(e.name));
    ASSERT_TRUE(shape.ok()) << shape.status();
    EXPECT_EQ(shape->name, e.name);
    EXPECT_EQ(shape->layers, e.layers) << e.name;
    EXPECT_EQ(shape->kv_heads, e.kv_heads) << e.name;
    EXPECT_EQ(shape->head_dim, e.head_dim) << e.name;
    EXPECT_EQ(shape->dtype_bytes, 2u) << e.name;
    EXPECT_EQ(shape->KvBytesPerToken(), e.bytes_per_token) << e.name;
  }
}

// A config.json with only the fields the engine needs; `fields` are appended (and override).
std::string Config(const std::string& fields) {
  return R"({"architectures": ["LlamaForCausalLM"], "vocab_size": 32, "hidden_size": 256,
             "intermediate_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
             "max_position_embeddings": 64, "rms_norm_eps": 1e-5, "rope_theta": 10000.0)" +
         fields + "}";
}

TEST(ModelConfigTest, DerivesHeadDimAndKvHeadsLikeHuggingFace) {
  absl::StatusOr<ModelShape> shape =
      LoadModelShape(WriteModel(Config(R"(, "torch_dtype": "float32")")));
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->kv_heads, 4u);  // no num_key_value_heads: multi-head attention
  EXPECT_EQ(shape->head_dim, 64u);
  EXPECT_EQ(shape->KvBytesPerToken(), 2u * 2 * 4 * 64 * 4);
}

TEST(ModelConfigTest, ReadsAModelDirectoryAndTransformers5Spelling) {
  absl::StatusOr<ModelShape> shape =
      LoadModelShape(KVTIER_SOURCE_DIR "/tests/engine/data/models/qwen3");
  ASSERT_TRUE(shape.ok()) << shape.status();
  EXPECT_EQ(shape->name, "qwen3");
  EXPECT_EQ(shape->layers, 2u);
  EXPECT_EQ(shape->kv_heads, 2u);
  EXPECT_EQ(shape->head_dim, 32u);    // explicit, not hidden_size / heads
  EXPECT_EQ(shape->dtype_bytes, 4u);  // "dtype": "float32"
}

TEST(ModelConfigTest, ErrorsNameTheFileAndTheField) {
  std::string path = WriteModel("");
  EXPECT_EQ(ErrorOf(R"({"num_hidden_layers": 2})"), path + ": field \"architectures\" is missing");
  EXPECT_EQ(ErrorOf(Config(R"(, "num_hidden_layers": "32", "torch_dtype": "bfloat16")")),
            path + ": field \"num_hidden_layers\" must be a positive integer, got \"32\"");
  EXPECT_EQ(ErrorOf(Config(R"(, "num_hidden_layers": 0, "torch_dtype": "bfloat16")")),
            path + ": field \"num_hidden_layers\" must be a positive integer, got 0");
  EXPECT_EQ(ErrorOf(Config("")),
            path + ": field \"torch_dtype\" is missing (nor is there \"dtype\")");
  EXPECT_EQ(ErrorOf(Config(R"(, "torch_dtype": "int4")")),
            path + ": field \"torch_dtype\" is \"int4\"; expected bfloat16, float16 or float32");
  EXPECT_EQ(ErrorOf(Config(R"(, "hidden_size": 250, "torch_dtype": "bfloat16")")),
            path +
                ": field \"hidden_size\" 250 is not a multiple of \"num_attention_heads\" 4; "
                "give \"head_dim\"");
  EXPECT_EQ(
      ErrorOf(Config(R"(, "num_key_value_heads": 3, "torch_dtype": "bfloat16")")),
      path + ": field \"num_attention_heads\" 4 is not a multiple of \"num_key_value_heads\" 3");
  EXPECT_EQ(ErrorOf(R"([1, 2])"), path + ": expected a JSON object");
  EXPECT_EQ(ErrorOf("{\"architectures\": 1,\n  \"num_hidden_layers\": }")
                .rfind(path + ": not valid JSON (", 0),
            0u);
}

TEST(ModelConfigTest, MissingFileIsNotFound) {
  absl::StatusOr<ModelShape> shape = LoadModelShape(ModelPath("no-such-model"));
  ASSERT_FALSE(shape.ok());
  EXPECT_EQ(shape.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(shape.status().message().find("no-such-model.json"), absl::string_view::npos);
}

}  // namespace
}  // namespace kvtier::replay
