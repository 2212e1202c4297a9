// Shared helpers of the tokenizer and chat-template golden tests: where the real tokenizers
// (fetched by tools/setup.sh) and the goldens (made by tests/engine/data/make_tokenizer_goldens.py
// with `tokenizers` and `transformers`) live, and reading them.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace kvtier::engine::testing {

// Every family's tokenizer.json; those with byte-level BPE and pre-tokenizer regexes; those with
// a chat template (Llama 2's package has SentencePiece-style BPE and no template).
inline const std::vector<std::string> kFamilies = {"qwen3", "qwen2_5", "llama3_1", "mistral_nemo",
                                                   "llama2"};
inline const std::vector<std::string> kByteLevelFamilies = {"qwen3", "qwen2_5", "llama3_1",
                                                            "mistral_nemo"};
inline const std::vector<std::string> kChatFamilies = kByteLevelFamilies;

inline std::filesystem::path TokenizerDir(const std::string& family) {
  return std::filesystem::path(KVTIER_SOURCE_DIR) / "third_party" / "tokenizers" / family;
}

inline std::filesystem::path DataDir() {
  return std::filesystem::path(KVTIER_SOURCE_DIR) / "tests" / "engine" / "data";
}

inline nlohmann::json ReadJsonFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path << " is missing";
  return nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
}

// The tokenizer directory of `family`; a test that needs it fails (never skips) when it is
// missing, because CI runs tools/setup.sh, which fetches it, before the tests.
inline bool HaveTokenizer(const std::string& family) {
  const bool have = std::filesystem::exists(TokenizerDir(family) / "tokenizer.json");
  EXPECT_TRUE(have) << TokenizerDir(family) << "/tokenizer.json is missing: run tools/setup.sh";
  return have;
}

}  // namespace kvtier::engine::testing
