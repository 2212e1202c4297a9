// `kvtier make-model` and `kvtier generate` as a user meets them: the real kvtier binary, a
// random-weight Qwen3-architecture model written by make-model with the real Qwen3 tokenizer
// (third_party/tokenizers/qwen3, fetched by tools/setup.sh: missing, the tests fail), greedy and
// seeded generation repeatable, the chat template rendered, and errors that say what and where.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/cpu_model.h"
#include "tests/daemon/kvtierd_process.h"
#include "tests/daemon/kvtierd_test_util.h"

namespace {

namespace fs = std::filesystem;

struct Ran {
  int exit_code = -1;
  std::string out, err;
};

std::string Quote(const std::string& arg) {
  std::string q = "'";
  for (char c : arg) q += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return q + "'";
}

std::string ReadAll(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

fs::path TempRoot() {
  return fs::path(::testing::TempDir()) / ("kvtier_generate_cli_" + std::to_string(::getpid()));
}

// Runs the kvtier binary with `args`, stdout and stderr captured apart.
Ran RunKvtier(const std::vector<std::string>& args) {
  const fs::path out = TempRoot() / "stdout", err = TempRoot() / "stderr";
  std::string command = Quote(std::string(KVTIER_BINARY_DIR) + "/tools/kvtier");
  for (const std::string& a : args) command += " " + Quote(a);
  command += " >" + Quote(out.string()) + " 2>" + Quote(err.string());
  const int status = std::system(command.c_str());
  Ran ran;
  ran.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  ran.out = ReadAll(out);
  ran.err = ReadAll(err);
  return ran;
}

// True if `s` is well-formed UTF-8 (no overlongs, surrogates or code points past U+10FFFF).
bool ValidUtf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const size_t n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 0;
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : c & (0x7f >> n);
    for (size_t k = 1; k < n; ++k) {
      const auto b = static_cast<unsigned char>(s[i + k]);
      if ((b >> 6) != 2) return false;
      cp = (cp << 6) | (b & 0x3f);
    }
    const uint32_t min[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min[n] || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff)) return false;
    i += n;
  }
  return true;
}

// Errors found before any model is read: no model needed.
class GenerateCliErrorsTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    fs::remove_all(TempRoot());
    fs::create_directories(TempRoot());
  }
  static void TearDownTestSuite() { fs::remove_all(TempRoot()); }

  static Ran Generate(std::vector<std::string> args) {
    args.insert(args.begin(), {"generate", "--model", (TempRoot() / "unread").string()});
    return RunKvtier(args);
  }
};

class GenerateCliTest : public GenerateCliErrorsTest {
 protected:
  // One model per test process: 2 layers, hidden 64, the Qwen3 vocabulary (~20 MB bf16), context
  // 64.
  static void SetUpTestSuite() {
    GenerateCliErrorsTest::SetUpTestSuite();
    model_ = (TempRoot() / "qwen3-random").string();
    const fs::path tokenizer = fs::path(KVTIER_SOURCE_DIR) / "third_party/tokenizers/qwen3";
    made_ = RunKvtier({"make-model", "--out", model_, "--tokenizer", tokenizer.string(), "--arch",
                       "qwen3", "--layers", "2", "--hidden", "64", "--max-position", "64"});
  }

  void SetUp() override {
    ASSERT_TRUE(fs::exists(fs::path(KVTIER_SOURCE_DIR) / "third_party/tokenizers/qwen3"))
        << "third_party/tokenizers/qwen3 is missing: run tools/setup.sh";
    ASSERT_EQ(made_.exit_code, 0) << made_.err;
  }

  static Ran Generate(std::vector<std::string> args) {
    args.insert(args.begin(), {"generate", "--model", model_});
    return RunKvtier(args);
  }

  static inline std::string model_;
  static inline Ran made_;
};

TEST_F(GenerateCliTest, MakeModelWritesAHuggingFaceDirectoryAndSaysItIsRandom) {
  for (const char* file : {"config.json", "generation_config.json", "model.safetensors",
                           "tokenizer.json", "tokenizer_config.json"}) {
    EXPECT_TRUE(fs::exists(fs::path(model_) / file)) << file;
  }
  EXPECT_NE(made_.out.find("Qwen3ForCausalLM"), std::string::npos) << made_.out;
  EXPECT_NE(made_.out.find("vocab 151669"), std::string::npos) << made_.out;
  EXPECT_NE(made_.out.find("meaningless"), std::string::npos) << made_.out;
  EXPECT_NE(ReadAll(fs::path(model_) / "config.json").find("\"bfloat16\""), std::string::npos);
}

TEST_F(GenerateCliTest, GreedyIsRepeatableAndStreamsValidUtf8) {
  const std::vector<std::string> args = {"--prompt", "Hello, world 😀", "--max-tokens",
                                         "8",        "--temperature",  "0"};
  const Ran first = Generate(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const Ran second = Generate(args);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_GT(first.out.size(), 1u);  // text and the final newline
  EXPECT_TRUE(ValidUtf8(first.out)) << first.out;
  EXPECT_NE(first.err.find("Qwen3ForCausalLM, cpu"), std::string::npos) << first.err;
}

// --daemon: the KV blocks are kvtierd's, so a second run finds the first one's prompt there (and
// says so on stderr) and generates the same text as without a daemon.
TEST_F(GenerateCliTest, WithADaemonTheSecondRunFindsThePromptInKvtierd) {
  auto model = kvtier::engine::CpuModel::Load(model_);
  ASSERT_TRUE(model.ok()) << model.status();
  const auto slot_bytes = (*model)->KvGeometry(16).slot_elems() * sizeof(float);
  kvtier::testing::TempDir dir;
  auto daemon = kvtier::testing::KvtierdProcess::Start(
      dir.path(), {"--t1.capacity_bytes", "8MiB", "--t1.slot_bytes", std::to_string(slot_bytes),
                   "--t1.touch_threads", "1", "--t1.huge_pages", "off", "--t2.enabled", "false"});
  ASSERT_TRUE(daemon.ok()) << daemon.status();
  const std::vector<std::string> args = {"--prompt",
                                         "A prompt that spans a few blocks of sixteen "
                                         "tokens, said twice: a prompt that spans a few blocks",
                                         "--max-tokens",
                                         "6",
                                         "--temperature",
                                         "0",
                                         "--device",
                                         "cpu"};
  const Ran alone = Generate(args);
  ASSERT_EQ(alone.exit_code, 0) << alone.err;
  std::vector<std::string> with = args;
  with.insert(with.end(), {"--daemon", (*daemon)->socket_path()});
  const Ran first = Generate(with);
  ASSERT_EQ(first.exit_code, 0) << first.err << (*daemon)->Log();
  const Ran second = Generate(with);
  ASSERT_EQ(second.exit_code, 0) << second.err;
  EXPECT_EQ(first.out, alone.out);
  EXPECT_EQ(second.out, alone.out);
  EXPECT_NE(first.err.find(" 0 of "), std::string::npos) << first.err;
  EXPECT_NE(second.err.find("prompt tokens from kvtierd (T0 0, T1 16"), std::string::npos)
      << second.err;
}

TEST_F(GenerateCliTest, SeededSamplingIsRepeatable) {
  const std::vector<std::string> args = {"--prompt",      "Once upon a time",
                                         "--max-tokens",  "8",
                                         "--temperature", "1.5",
                                         "--top-k",       "50",
                                         "--top-p",       "0.9",
                                         "--seed",        "7"};
  const Ran first = Generate(args), second = Generate(args);
  ASSERT_EQ(first.exit_code, 0) << first.err;
  EXPECT_EQ(first.out, second.out);
  EXPECT_TRUE(ValidUtf8(first.out)) << first.out;
}

TEST_F(GenerateCliTest, ChatRendersTheTemplate) {
  const Ran r = Generate(
      {"--prompt", "Hello", "--chat", "--show-prompt", "--max-tokens", "2", "--temperature", "0"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // Qwen3's template, as transformers' apply_chat_template(add_generation_prompt=True) renders it.
  EXPECT_EQ(r.err.rfind("<|im_start|>user\nHello<|im_end|>\n<|im_start|>assistant\n", 0), 0u)
      << r.err;
  EXPECT_NE(r.err.find("9 prompt tokens"), std::string::npos) << r.err;
}

TEST_F(GenerateCliErrorsTest, MissingModelDirectoryIsNamed) {
  const Ran r = RunKvtier({"generate", "--model", "/nonexistent/model", "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--model /nonexistent/model: not a directory"), std::string::npos) << r.err;
}

TEST_F(GenerateCliErrorsTest, UnknownArchitectureNamesTheFileAndField) {
  const fs::path dir = TempRoot() / "gpt2";
  fs::create_directories(dir);
  std::ofstream(dir / "config.json") << R"({"architectures": ["GPT2LMHeadModel"]})";
  const Ran r = RunKvtier({"generate", "--model", dir.string(), "--prompt", "hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find((dir / "config.json").string()), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("GPT2LMHeadModel\" is not supported"), std::string::npos) << r.err;
}

TEST_F(GenerateCliTest, PromptLongerThanTheContextIsRefused) {
  std::string prompt;
  for (int i = 0; i < 100; ++i) prompt += "word ";  // 101 tokens: the last space is one
  const Ran r = Generate({"--prompt", prompt});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--prompt is 101 tokens; the model's context is 64"), std::string::npos)
      << r.err;
  EXPECT_NE(r.err.find("max_position_embeddings"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

TEST_F(GenerateCliErrorsTest, GpuDeviceIsRefusedAsNotBuilt) {
  const Ran r = Generate({"--prompt", "hi", "--device", "gpu"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--device gpu: the GPU backend is not available"), std::string::npos)
      << r.err;
}

TEST_F(GenerateCliErrorsTest, BadFlagValuesNameTheFlag) {
  for (const auto& [flag, value] :
       std::vector<std::pair<std::string, std::string>>{{"--top-p", "0"},
                                                        {"--temperature", "-1"},
                                                        {"--max-tokens", "0"},
                                                        {"--device", "tpu"},
                                                        {"--top-k", "many"}}) {
    const Ran r = Generate({"--prompt", "hi", flag, value});
    EXPECT_EQ(r.exit_code, 2) << flag;
    EXPECT_NE(r.err.find(flag), std::string::npos) << flag << ": " << r.err;
  }
  const Ran r = RunKvtier(
      {"make-model", "--out", (TempRoot() / "x").string(), "--tokenizer", "/nonexistent/tok"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("/nonexistent/tok/tokenizer.json"), std::string::npos) << r.err;
}

}  // namespace
