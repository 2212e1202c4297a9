// The tokenizer's parts on small hand-made vocabularies, one rule each: merge order (rank first,
// then leftmost), ignore_merges, added tokens' lstrip/rstrip/single_word, UTF-8 validation of
// input, the U+FFFD rule of decoding and the streaming decoder around invalid bytes; and errors
// that name the file and what in it is wrong or unsupported.
#include <string>
#include <vector>

#include "engine/byte_level.h"
#include "engine/stream_decoder.h"
#include "engine/tokenizer.h"
#include "engine/utf8.h"
#include "gtest/gtest.h"

namespace kvtier::engine {
namespace {

// A byte-level BPE with ids 0..255 for the bytes, `extra` entries from 256 on, and `merges`.
std::unique_ptr<Tokenizer> MakeTokenizer(
    const std::vector<std::string>& extra,
    const std::vector<std::pair<std::string, std::string>>& merges, bool ignore_merges = false,
    std::vector<AddedToken> added = {}) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) {
    spec.model.vocab.emplace_back(BytesToByteLevel(std::string(1, static_cast<char>(b))), b);
  }
  for (size_t i = 0; i < extra.size(); ++i) spec.model.vocab.emplace_back(extra[i], 256 + i);
  spec.model.merges = merges;
  spec.model.byte_level = true;
  spec.decoder.byte_level = true;
  spec.model.ignore_merges = ignore_merges;
  PreTokenizerStep byte_level;
  byte_level.kind = PreTokenizerStep::Kind::kByteLevel;
  spec.pre_tokenizer.push_back(byte_level);
  spec.added_tokens = std::move(added);
  auto t = Tokenizer::Create(std::move(spec), TokenizerConfig());
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(t).value() : nullptr;
}

std::vector<TokenId> Ids(const Tokenizer& t, std::string_view text) {
  auto ids = t.Encode(text, false);
  EXPECT_TRUE(ids.ok()) << ids.status();
  return ids.ok() ? *ids : std::vector<TokenId>();
}

TEST(BpeTest, LowerRankMergesFirstWhereverItIs) {
  // "b c" (rank 0) beats "a b" (rank 1) although "a b" is further left.
  auto t = MakeTokenizer({"bc", "ab", "abc"}, {{"b", "c"}, {"a", "b"}, {"a", "bc"}});
  EXPECT_EQ(Ids(*t, "abc"), (std::vector<TokenId>{258}));
  auto swapped = MakeTokenizer({"bc", "ab", "abc"}, {{"a", "b"}, {"b", "c"}, {"a", "bc"}});
  EXPECT_EQ(Ids(*swapped, "abc"), (std::vector<TokenId>{257, 'c'}));
}

TEST(BpeTest, EqualRanksMergeLeftmostFirst) {
  auto t = MakeTokenizer({"aa"}, {{"a", "a"}});
  EXPECT_EQ(Ids(*t, "aaa"), (std::vector<TokenId>{256, 'a'}));
  EXPECT_EQ(Ids(*t, "aaaa"), (std::vector<TokenId>{256, 256}));
}

TEST(BpeTest, IgnoreMergesTakesAWholeWordInTheVocabulary) {
  EXPECT_EQ(Ids(*MakeTokenizer({"xyz"}, {}, /*ignore_merges=*/true), "xyz"),
            (std::vector<TokenId>{256}));
  EXPECT_EQ(Ids(*MakeTokenizer({"xyz"}, {}, /*ignore_merges=*/false), "xyz"),
            (std::vector<TokenId>{'x', 'y', 'z'}));
}

TEST(BpeTest, LongWordsMergeCompletely) {
  auto t = MakeTokenizer({"aa", "aaaa"}, {{"a", "a"}, {"aa", "aa"}});
  EXPECT_EQ(Ids(*t, std::string(100001, 'a')).size(), 25001u);  // 25000 x "aaaa" + "a"
}

TEST(AddedTokensTest, StripFlagsAbsorbWhitespace) {
  AddedToken left{300, "<L>", /*lstrip=*/true, false, false, false, true};
  AddedToken right{301, "<R>", false, /*rstrip=*/true, false, false, true};
  auto t = MakeTokenizer({}, {}, false, {left, right});
  EXPECT_EQ(Ids(*t, "a  <L>b"), (std::vector<TokenId>{'a', 300, 'b'}));
  EXPECT_EQ(Ids(*t, "a<R>  b"), (std::vector<TokenId>{'a', 301, 'b'}));
}

TEST(AddedTokensTest, SingleWordMatchesOnlyBetweenNonWordCharacters) {
  AddedToken word{300, "<w>", false, false, /*single_word=*/true, false, false};
  auto t = MakeTokenizer({}, {}, false, {word});
  EXPECT_EQ(Ids(*t, "x<w>"), (std::vector<TokenId>{'x', '<', 'w', '>'}));
  EXPECT_EQ(Ids(*t, "x <w>"), (std::vector<TokenId>{'x', ' ', 300}));
}

TEST(AddedTokensTest, LongestMatchWins) {
  auto t = MakeTokenizer({}, {}, false,
                         {AddedToken{300, "<a>", false, false, false, false, true},
                          AddedToken{301, "<a><b>", false, false, false, false, true}});
  EXPECT_EQ(Ids(*t, "<a><b><a>"), (std::vector<TokenId>{301, 300}));
}

TEST(TokenizerTest, EncodeRefusesInvalidUtf8NamingTheOffset) {
  auto t = MakeTokenizer({}, {});
  auto ids = t->Encode("ok\xC3(", false);
  ASSERT_FALSE(ids.ok());
  EXPECT_EQ(ids.status().message(), "text to encode is not valid UTF-8 at byte 2");
}

TEST(Utf8Test, LossyReplacesEachMaximalInvalidSubpart) {
  EXPECT_EQ(LossyUtf8("a\xF0\x9F\x98"
                      "b"),
            "a\xEF\xBF\xBD"
            "b");                                                // truncated 4-byte: one U+FFFD
  EXPECT_EQ(LossyUtf8("\xC0\xAF"), "\xEF\xBF\xBD\xEF\xBF\xBD");  // overlong: two
  EXPECT_EQ(LossyUtf8("\xED\xA0\x80"), "\xEF\xBF\xBD\xEF\xBF\xBD\xEF\xBF\xBD");  // surrogate: three
  EXPECT_EQ(LossyUtf8("\xE4\xBD\xA0\xFF"), "\xE4\xBD\xA0\xEF\xBF\xBD");
  EXPECT_EQ(IncompleteSuffixLength("x\xF0\x9F\x98"), 3u);
  EXPECT_EQ(IncompleteSuffixLength("x\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(IncompleteSuffixLength("x\xED\xA0"), 0u);  // can never complete: not held back
}

TEST(StreamDecoderTest, HoldsBackSplitCharactersAndMatchesDecode) {
  auto t = MakeTokenizer({}, {});
  // "你" is E4 BD A0: three byte tokens; then a stray continuation byte and "!".
  const std::vector<TokenId> ids = {0xE4, 0xBD, 0xA0, 0x80, '!', 0xF0, 0x9F};
  StreamDecoder stream(*t);
  EXPECT_EQ(stream.Push(ids[0]), "");
  EXPECT_EQ(stream.Push(ids[1]), "");
  EXPECT_EQ(stream.Push(ids[2]), "你");
  EXPECT_EQ(stream.Push(ids[3]), "\xEF\xBF\xBD");
  EXPECT_EQ(stream.Push(ids[4]), "!");
  EXPECT_EQ(stream.Push(ids[5]), "");
  EXPECT_EQ(stream.Push(ids[6]), "");
  EXPECT_EQ(stream.Finish(), "\xEF\xBF\xBD");
  EXPECT_EQ(t->Decode(ids), "你\xEF\xBF\xBD!\xEF\xBF\xBD");
}

TEST(TokenizerJsonTest, ErrorsNameThePathAndWhat) {
  const std::string vocab = R"("vocab": {"a": 0, "b": 1}, )";
  const std::string decoder = R"(, "decoder": {"type": "ByteLevel"})";
  const std::string bytelevel = R"(, "pre_tokenizer": {"type": "ByteLevel"}})";
  for (const auto& [json, what] : std::vector<std::pair<std::string, std::string>>{
           {"{", "f.json: not valid JSON"},
           {R"({"model": {"type": "WordPiece"}})",
            "f.json: model: type \"WordPiece\" is not supported"},
           {R"({"model": {"type": "BPE", )" + vocab + R"("merges": ["a c"]})" + decoder + bytelevel,
            "tokenizer.json: model.merges[0] \"a c\": a part or the result is not in model.vocab"},
           {R"({"model": {"type": "BPE", )" + vocab +
                R"("merges": []}, "pre_tokenizer": {"type": "Metaspace"})" + decoder + "}",
            "f.json: pre_tokenizer: type \"Metaspace\" is not supported"},
           {R"({"model": {"type": "BPE", )" + vocab +
                R"("merges": []}, "decoder": {"type": "WordPiece"})" + bytelevel,
            "f.json: decoder: type \"WordPiece\" is not supported"},
           {R"({"model": {"type": "BPE", )" + vocab + R"("merges": []})" + decoder + "}",
            "f.json: decoder: ByteLevel decoding goes with a ByteLevel pre-tokenizer, and only "
            "with it"},
           {R"({"model": {"type": "BPE", )" + vocab + R"("merges": [], "ignore_merges": "yes"})" +
                decoder + "}",
            "f.json: model: \"ignore_merges\" must be true or false"},
           {R"({"model": {"type": "BPE", )" + vocab +
                R"("merges": []}, "added_tokens": [{"id": 2, "content": "<x>", "special": 1}])" +
                decoder + bytelevel,
            "f.json: added_tokens[0]: \"special\" must be true or false"}}) {
    auto spec = ParseTokenizerJson(json, "f.json");
    absl::Status status = spec.status();
    if (spec.ok()) status = Tokenizer::Create(std::move(spec).value(), TokenizerConfig()).status();
    ASSERT_FALSE(status.ok()) << json;
    EXPECT_EQ(std::string(status.message()).rfind(what, 0), 0u) << json << "\n -> " << status;
  }
}

TEST(TokenizerTest, LoadNamesAMissingDirectoryOrFile) {
  auto t = Tokenizer::Load("/nonexistent/model");
  ASSERT_FALSE(t.ok());
  EXPECT_EQ(t.status().message(), "/nonexistent/model/tokenizer.json: cannot open");
}

}  // namespace
}  // namespace kvtier::engine
