// The engine's config.json parser: what it reads from files transformers 4.x and 5.x wrote, and
// the clear error for each field it cannot honour.
#include "engine/model_config.h"

#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>

#include "tests/engine/safetensors_writer.h"

namespace kvtier::engine {
namespace {

std::string GoldenDir(const std::string& name) {
  return std::string(KVTIER_SOURCE_DIR) + "/tests/engine/data/models/" + name;
}

ModelConfig Load(const std::string& path) {
  absl::StatusOr<ModelConfig> config = LoadModelConfig(path);
  EXPECT_TRUE(config.ok()) << config.status();
  return config.ok() ? *config : ModelConfig{};
}

TEST(EngineModelConfigTest, ReadsTransformers5Files) {
  const ModelConfig llama = Load(GoldenDir("llama3"));
  EXPECT_EQ(llama.name, "llama3");
  EXPECT_EQ(llama.architecture, Architecture::kLlama);
  EXPECT_EQ(llama.dtype, WeightDtype::kFloat32);
  EXPECT_EQ(llama.rope.type, RopeConfig::Type::kLlama3);
  EXPECT_EQ(llama.rope.theta, 500000.0);
  EXPECT_EQ(llama.rope.factor, 8.0);
  EXPECT_EQ(llama.rope.original_max_position, 64u);
  EXPECT_FALSE(llama.qkv_bias || llama.qk_norm || llama.tie_word_embeddings);
  EXPECT_EQ(llama.generation.eos_token_ids, std::vector<uint32_t>{2});
  EXPECT_EQ(llama.generation.bos_token_id, 1u);

  const ModelConfig qwen2 = Load(GoldenDir("qwen2"));
  EXPECT_TRUE(qwen2.qkv_bias);
  EXPECT_EQ(qwen2.dtype, WeightDtype::kFloat16);
  EXPECT_EQ(qwen2.sliding_window, 0u);  // use_sliding_window false

  const ModelConfig qwen3 = Load(GoldenDir("qwen3") + "/config.json");  // the file itself
  EXPECT_TRUE(qwen3.qk_norm && qwen3.tie_word_embeddings);
  EXPECT_EQ(qwen3.head_dim, 32u);
  EXPECT_EQ(qwen3.q_dim(), 128u);  // != hidden_size 64
  EXPECT_EQ(qwen3.generation.eos_token_ids, std::vector<uint32_t>{2});

  const ModelConfig mistral = Load(GoldenDir("mistral"));
  EXPECT_EQ(mistral.sliding_window, 24u);
  EXPECT_EQ(mistral.dtype, WeightDtype::kBFloat16);
}

TEST(EngineModelConfigTest, ReadsTransformers4Spelling) {
  const ModelConfig llama = Load(KVTIER_SOURCE_DIR "/configs/models/llama-3.1-8b.json");
  EXPECT_EQ(llama.name, "llama-3.1-8b");
  EXPECT_EQ(llama.rope.type, RopeConfig::Type::kLlama3);  // from "rope_scaling"
  EXPECT_EQ(llama.rope.theta, 500000.0);                  // top-level "rope_theta"
  EXPECT_EQ(llama.rope.original_max_position, 8192u);
  EXPECT_EQ(llama.head_dim, 128u);  // hidden_size / num_attention_heads
  EXPECT_EQ(llama.generation.eos_token_ids, (std::vector<uint32_t>{128001, 128008, 128009}));
  const ModelConfig qwen = Load(KVTIER_SOURCE_DIR "/configs/models/qwen2.5-7b.json");
  EXPECT_EQ(qwen.sliding_window, 0u);  // "sliding_window": 131072 but use_sliding_window false
  EXPECT_TRUE(qwen.qkv_bias);
}

// The golden Mistral config with `edit` applied, written to a temp file; returns the error.
std::string ErrorOf(const std::function<void(nlohmann::json&)>& edit, std::string* path_out) {
  std::ifstream in(GoldenDir("mistral") + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  edit(config);
  const std::string path = testing::TempDir("config") + "/bad.json";
  std::ofstream(path) << config.dump();
  *path_out = path;
  absl::StatusOr<ModelConfig> parsed = LoadModelConfig(path);
  EXPECT_FALSE(parsed.ok());
  return std::string(parsed.status().message());
}

TEST(EngineModelConfigTest, EveryUnsupportedOrInconsistentFieldIsAClearError) {
  using Json = nlohmann::json;
  const std::vector<std::pair<std::function<void(Json&)>, std::string>> cases = {
      {[](Json& c) { c["architectures"] = {"GemmaForCausalLM"}; },
       "architecture \"GemmaForCausalLM\" is not supported; expected LlamaForCausalLM, "
       "Qwen2ForCausalLM, Qwen3ForCausalLM or MistralForCausalLM"},
      {[](Json& c) {
         c["architectures"] = {"A", "B"};
       },
       "field \"architectures\" must be a list of one name, got [\"A\",\"B\"]"},
      {[](Json& c) { c["model_type"] = "llama"; },
       "field \"model_type\" is \"llama\" but \"architectures\" is MistralForCausalLM "
       "(\"mistral\")"},
      {[](Json& c) { c["torch_dtype"] = "float16"; },
       "field \"dtype\" is \"bfloat16\" but \"torch_dtype\" is \"float16\""},
      {[](Json& c) { c["dtype"] = "float8_e4m3fn"; },
       "field \"dtype\" is \"float8_e4m3fn\"; expected bfloat16, float16 or float32"},
      {[](Json& c) { c["rope_parameters"]["rope_type"] = "yarn"; },
       "field \"rope_parameters\" has rope type \"yarn\"; supported: \"default\", \"llama3\""},
      {[](Json& c) {
         c["rope_parameters"] = {{"rope_type", "llama3"}, {"rope_theta", 1e4}};
       },
       "field \"factor\" is missing"},
      {[](Json& c) { c["rope_theta"] = 5.0; },
       "field \"rope_theta\" 5 disagrees with \"rope_parameters\".rope_theta 10000"},
      {[](Json& c) { c.erase("rope_parameters"); }, "field \"rope_theta\" is missing"},
      {[](Json& c) {
         c["rope_parameters"] = {{"full_attention", {{"rope_theta", 1e4}}}};
       },
       "field \"rope_parameters\" holds per-layer-type parameters (\"full_attention\")"},
      {[](Json& c) { c["rope_parameters"]["partial_rotary_factor"] = 0.5; },
       "field \"rope_parameters.partial_rotary_factor\" is 0.5; only 1 is supported"},
      {[](Json& c) { c["hidden_act"] = "gelu"; },
       "field \"hidden_act\" is \"gelu\"; only \"silu\" is supported"},
      {[](Json& c) { c["mlp_bias"] = true; }, "field \"mlp_bias\" is true; not supported"},
      {[](Json& c) { c["head_dim"] = 15; },
       "field \"head_dim\" is 15; RoPE needs an even head_dim"},
      {[](Json& c) { c["num_key_value_heads"] = 3; },
       "field \"num_attention_heads\" 4 is not a multiple of \"num_key_value_heads\" 3"},
      {[](Json& c) { c["eos_token_id"] = 512; },
       "field \"eos_token_id\" 512 is not below \"vocab_size\" 512"},
      {[](Json& c) { c["rms_norm_eps"] = 0; },
       "field \"rms_norm_eps\" must be a number > 0, got 0"},
      {[](Json& c) { c["sliding_window"] = -1; },
       "field \"sliding_window\" must be a positive integer, got -1"},
      {[](Json& c) { c.erase("vocab_size"); }, "field \"vocab_size\" is missing"},
  };
  for (const auto& [edit, want] : cases) {
    std::string path;
    const std::string error = ErrorOf(edit, &path);
    EXPECT_EQ(error.rfind(path + ": ", 0), 0u) << error;
    EXPECT_NE(error.find(want), std::string::npos) << "got: " << error << "\nwant: " << want;
  }
}

TEST(EngineModelConfigTest, QwenSlidingWindowLayersAreRefused) {
  std::ifstream in(GoldenDir("qwen2") + "/config.json");
  nlohmann::json config = nlohmann::json::parse(in);
  config["use_sliding_window"] = true;
  const std::string path = testing::TempDir("qwen_window") + "/qwen.json";
  std::ofstream(path) << config.dump();
  EXPECT_EQ(LoadModelConfig(path).status().message(),
            path +
                ": field \"use_sliding_window\" is true; Qwen sliding-window layers are not "
                "supported");
}

TEST(EngineModelConfigTest, GenerationConfigOverridesAndIsChecked) {
  const std::string dir = testing::TempDir("generation");
  std::filesystem::copy_file(GoldenDir("llama3") + "/config.json", dir + "/config.json");
  std::ofstream(dir + "/generation_config.json")
      << R"({"eos_token_id": [2, 7], "do_sample": true, "temperature": 0.6, "top_p": 0.9,
             "top_k": 20})";
  const ModelConfig config = Load(dir);
  EXPECT_EQ(config.generation.eos_token_ids, (std::vector<uint32_t>{2, 7}));
  EXPECT_EQ(config.generation.do_sample, true);
  EXPECT_EQ(config.generation.temperature, 0.6);
  EXPECT_EQ(config.generation.top_p, 0.9);
  EXPECT_EQ(config.generation.top_k, 20u);
  std::ofstream(dir + "/generation_config.json", std::ios::trunc) << R"({"top_p": 1.5})";
  EXPECT_EQ(LoadModelConfig(dir).status().message(),
            dir + "/generation_config.json: field \"top_p\" is 1.5; must be in (0, 1]");
  std::ofstream(dir + "/generation_config.json", std::ios::trunc) << R"({"temperature": -1})";
  EXPECT_EQ(LoadModelConfig(dir).status().message(),
            dir + "/generation_config.json: field \"temperature\" is -1; must be >= 0");
  std::ofstream(dir + "/generation_config.json", std::ios::trunc) << R"({"eos_token_id": "x"})";
  EXPECT_EQ(LoadModelConfig(dir).status().message(),
            dir +
                "/generation_config.json: field \"eos_token_id\" must be a token id or a list of "
                "token ids, got \"x\"");
}

}  // namespace
}  // namespace kvtier::engine
