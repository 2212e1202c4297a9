// The engine's tokenizer against Hugging Face `tokenizers` 0.23 on the real Qwen3, Qwen2.5,
// Llama 3.1, Mistral Nemo (byte-level) and Llama 2 package's (SentencePiece-style, byte fallback)
// tokenizer.json files: token ids of a corpus with code, emoji, CJK,
// whitespace runs, Unicode spaces, decomposed accents and special tokens; decoding (including
// U+FFFD for incomplete characters) and streaming decoding.
#include <atomic>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>
#include <vector>

#include "engine/stream_decoder.h"
#include "engine/tokenizer.h"
#include "engine/utf8.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"

namespace kvtier::engine {
namespace {

using testing::DataDir;
using testing::ReadJsonFile;

class TokenizerGoldenTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::HaveTokenizer(GetParam()));
    auto loaded = Tokenizer::Load(testing::TokenizerDir(GetParam()));
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded).value();
    corpus_ = ReadJsonFile(DataDir() / "tokenizer_corpus.json").get<std::vector<std::string>>();
    golden_ = ReadJsonFile(DataDir() / "tokenizer_goldens" / (GetParam() + ".json"));
    ASSERT_EQ(golden_["encode"].size(), corpus_.size());
  }

  std::string StreamDecode(const std::vector<TokenId>& ids, bool skip_special) const {
    StreamDecoder decoder(*tokenizer_, skip_special);
    std::string text;
    for (const TokenId id : ids) {
      const std::string piece = decoder.Push(id);
      EXPECT_TRUE(IsValidUtf8(piece));
      text += piece;
    }
    return text + decoder.Finish();
  }

  std::unique_ptr<Tokenizer> tokenizer_;
  std::vector<std::string> corpus_;
  nlohmann::json golden_;
};

TEST_P(TokenizerGoldenTest, EncodeMatchesTokenizers) {
  for (size_t i = 0; i < corpus_.size(); ++i) {
    auto ids = tokenizer_->Encode(corpus_[i], /*add_special_tokens=*/false);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, golden_["encode"][i].get<std::vector<TokenId>>())
        << GetParam() << " corpus[" << i << "]: " << corpus_[i].substr(0, 80);
  }
}

TEST_P(TokenizerGoldenTest, EncodeWithSpecialTokensMatchesTokenizers) {
  for (const auto& [index, expected] : golden_["encode_special"].items()) {
    auto ids = tokenizer_->Encode(corpus_[std::stoul(index)], /*add_special_tokens=*/true);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*ids, expected.get<std::vector<TokenId>>()) << "corpus[" << index << "]";
  }
}

TEST_P(TokenizerGoldenTest, DecodeMatchesTokenizers) {
  for (size_t i = 0; i < corpus_.size(); ++i) {
    const auto ids = golden_["encode"][i].get<std::vector<TokenId>>();
    const std::string key = std::to_string(i);
    const std::string expected = golden_["decode"].value(key, corpus_[i]);
    EXPECT_EQ(tokenizer_->Decode(ids), expected) << "corpus[" << i << "]";
    EXPECT_EQ(StreamDecode(ids, false), expected) << "corpus[" << i << "] streamed";
    const std::string skipped = golden_["decode_skip_special"].value(key, expected);
    EXPECT_EQ(tokenizer_->Decode(ids, /*skip_special_tokens=*/true), skipped)
        << "corpus[" << i << "]";
    EXPECT_EQ(StreamDecode(ids, true), skipped)
        << "corpus[" << i << "] streamed, skipping specials";
  }
}

// Every prefix of the ids of emoji / CJK text: incomplete characters decode to U+FFFD exactly
// as in `tokenizers`, and the streaming decoder never emits a character before it is complete.
TEST_P(TokenizerGoldenTest, PrefixDecodesMatchTokenizers) {
  for (const auto& [index, decodes] : golden_["prefix_decodes"].items()) {
    const auto ids = golden_["encode"][std::stoul(index)].get<std::vector<TokenId>>();
    ASSERT_EQ(decodes.size(), ids.size() + 1);
    for (size_t k = 0; k <= ids.size(); ++k) {
      const std::vector<TokenId> prefix(ids.begin(), ids.begin() + k);
      const std::string expected = decodes[k].get<std::string>();
      EXPECT_EQ(tokenizer_->Decode(prefix), expected) << "corpus[" << index << "] first " << k;
      EXPECT_EQ(StreamDecode(prefix, false), expected) << "corpus[" << index << "] first " << k;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(RealTokenizers, TokenizerGoldenTest,
                         ::testing::ValuesIn(testing::kFamilies));

// The ids behind tokenizer_config.json's special tokens, as transformers resolves them.
TEST(TokenizerSpecialTokensTest, ResolvedFromTheConfig) {
  for (const std::string family : {"qwen3", "llama3_1", "mistral_nemo"}) {
    ASSERT_TRUE(testing::HaveTokenizer(family));
  }
  auto qwen = Tokenizer::Load(testing::TokenizerDir("qwen3"));
  ASSERT_TRUE(qwen.ok()) << qwen.status();
  EXPECT_FALSE((*qwen)->special_tokens().bos.has_value());
  EXPECT_EQ((*qwen)->special_tokens().eos, std::vector<TokenId>{151645});  // <|im_end|>
  EXPECT_EQ((*qwen)->special_tokens().pad, 151643u);                       // <|endoftext|>
  EXPECT_EQ((*qwen)->vocab_size(), 151669u);
  EXPECT_TRUE((*qwen)->IsSpecial(151644));
  EXPECT_FALSE((*qwen)->IsSpecial(151667));  // <think> is added, not special
  auto llama = Tokenizer::Load(testing::TokenizerDir("llama3_1"));
  ASSERT_TRUE(llama.ok()) << llama.status();
  EXPECT_EQ((*llama)->special_tokens().bos, 128000u);
  EXPECT_EQ((*llama)->special_tokens().eos, std::vector<TokenId>{128009});  // <|eot_id|>
  auto mistral = Tokenizer::Load(testing::TokenizerDir("mistral_nemo"));
  ASSERT_TRUE(mistral.ok()) << mistral.status();
  EXPECT_EQ((*mistral)->special_tokens().bos, 1u);
  EXPECT_EQ((*mistral)->special_tokens().unk, 0u);
  EXPECT_EQ((*mistral)->special_tokens().eos_token, "</s>");
}

// generation_config.json, when the directory has one, decides what ends generation.
TEST(TokenizerSpecialTokensTest, GenerationConfigEosListWins) {
  ASSERT_TRUE(testing::HaveTokenizer("qwen3"));
  const auto dir = std::filesystem::path(::testing::TempDir()) / "qwen3_with_generation_config";
  std::filesystem::create_directories(dir);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) {
    std::filesystem::copy_file(testing::TokenizerDir("qwen3") / f, dir / f,
                               std::filesystem::copy_options::overwrite_existing);
  }
  std::ofstream(dir / "generation_config.json")
      << R"({"eos_token_id": [151645, 151643], "pad_token_id": 151643})";
  auto t = Tokenizer::Load(dir);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ((*t)->special_tokens().eos, (std::vector<TokenId>{151645, 151643}));
  std::ofstream(dir / "generation_config.json") << R"({"eos_token_id": "x"})";
  t = Tokenizer::Load(dir);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(std::string(t.status().message())
                .find("generation_config.json: \"eos_token_id\" must be a token id"),
            std::string::npos)
      << t.status();
  std::filesystem::remove_all(dir);
}

// Megabyte-long runs (spaces, newlines, punctuation, letters) match the regexes' lookahead and
// repetition on every family without hitting a PCRE2 limit, and decode back to themselves.
// The optimised build runs whole megabytes; under a sanitizer (the asan preset is a debug build,
// where four families of megabyte runs took over five minutes) the same paths run on 128 KiB, so
// the suite stays inside its time limit while still checking their memory safety.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
constexpr size_t kLongRun = size_t{1} << 17;
#else
constexpr size_t kLongRun = size_t{1} << 20;
#endif

TEST(TokenizerLongInputTest, MegabyteRunsEncodeAndRoundTrip) {
  const std::string mb(kLongRun, ' ');
  const std::vector<std::string> texts = {mb + "x", std::string(kLongRun, '\n') + "x",
                                          std::string(kLongRun, '!'),
                                          mb + std::string(kLongRun, '\t') + " y"};
  for (const std::string& family : testing::kByteLevelFamilies) {
    ASSERT_TRUE(testing::HaveTokenizer(family));
    auto t = Tokenizer::Load(testing::TokenizerDir(family));
    ASSERT_TRUE(t.ok()) << t.status();
    for (const std::string& text : texts) {
      auto ids = (*t)->Encode(text, false);
      ASSERT_TRUE(ids.ok()) << family << ": " << ids.status();
      EXPECT_EQ((*t)->Decode(*ids), text) << family;
    }
  }
}

// Encode is const and thread-safe: threads sharing one tokenizer (and its word cache) get the
// golden ids.
TEST(TokenizerThreadsTest, ConcurrentEncodesGetTheGoldenIds) {
  ASSERT_TRUE(testing::HaveTokenizer("qwen3"));
  auto t = Tokenizer::Load(testing::TokenizerDir("qwen3"));
  ASSERT_TRUE(t.ok()) << t.status();
  const auto corpus = testing::ReadJsonFile(testing::DataDir() / "tokenizer_corpus.json")
                          .get<std::vector<std::string>>();
  const auto golden =
      testing::ReadJsonFile(testing::DataDir() / "tokenizer_goldens" / "qwen3.json");
  std::atomic<int> mismatches{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = 0; i < corpus.size(); ++i) {
          const size_t j = (i + k * 7) % corpus.size();  // threads visit the texts out of step
          auto ids = (*t)->Encode(corpus[j], false);
          if (!ids.ok() || *ids != golden["encode"][j].get<std::vector<TokenId>>()) ++mismatches;
        }
      }
    });
  }
  for (std::thread& th : threads) th.join();
  EXPECT_EQ(mismatches.load(), 0);
}

}  // namespace
}  // namespace kvtier::engine
