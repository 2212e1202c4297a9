// The engine's tokenizer: encode and decode speed on real text (this repository's docs and C++
// sources, ~1-2 MB, plus CJK and emoji), for each tokenizer setup fetched; printed next to the
// ceiling measured in the same run: the pre-tokenizer alone (NFC + PCRE2 split, no BPE), which
// encoding cannot beat. Also a 1 MiB single "word" (no pre-tokenizer split), which a quadratic
// merge loop would take minutes on.
//
//   kvtier_tokenizer_bench [FAMILY...]   (default: every family in third_party/tokenizers)
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/stream_decoder.h"
#include "engine/tokenizer.h"

namespace {

using Clock = std::chrono::steady_clock;
namespace fs = std::filesystem;
using kvtier::engine::TokenId;

double Seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

// Docs and sources of this repository: English prose, Markdown tables and C++.
std::string BenchText() {
  std::string text;
  const fs::path root(KVTIER_SOURCE_DIR);
  for (const char* dir : {"docs", "engine", "index", "tiers", "daemon"}) {
    for (const auto& entry : fs::recursive_directory_iterator(root / dir)) {
      const std::string ext = entry.path().extension().string();
      if (ext != ".md" && ext != ".cc" && ext != ".h") continue;
      std::ifstream in(entry.path());
      std::stringstream s;
      s << in.rdbuf();
      text += s.str();
      if (text.size() > (2 << 20)) return text;
    }
  }
  for (int i = 0; i < 2000; ++i)
    text +=
        "分词器的速度测试：你好，世界！今天天气很好。日本語のテキスト "
        "😀👍🏽 ";
  return text;
}

void Report(const char* what, double seconds, size_t bytes, size_t tokens,
            const char* unit = "tokens") {
  std::printf("  %-38s %8.1f ms  %8.2f MB/s  %10.0f %s/s\n", what, seconds * 1e3,
              bytes / seconds / 1e6, tokens / seconds, unit);
}

int BenchFamily(const std::string& family, const std::string& text) {
  const fs::path dir = fs::path(KVTIER_SOURCE_DIR) / "third_party" / "tokenizers" / family;
  auto start = Clock::now();
  auto loaded = kvtier::engine::Tokenizer::Load(dir);
  if (!loaded.ok()) {
    std::fprintf(stderr, "%s: %s\n", family.c_str(), loaded.status().ToString().c_str());
    return 1;
  }
  const auto& tok = **loaded;
  std::printf("%s: loaded in %.0f ms (%zu ids); text %.2f MB\n", family.c_str(),
              Seconds(start) * 1e3, tok.vocab_size(), text.size() / 1e6);

  // The ceiling: normalization and the pre-tokenizer regexes without BPE.
  auto spec = kvtier::engine::ParseTokenizerJson(*kvtier::engine::ReadFile(dir / "tokenizer.json"),
                                                 "tokenizer.json");
  auto pre = kvtier::engine::PreTokenizer::Create(spec->pre_tokenizer);
  const kvtier::engine::Normalizer normalizer(spec->normalizer);
  start = Clock::now();
  std::vector<std::string_view> words;
  const std::string normalized = normalizer.Normalize(text);
  if (!pre->Split(normalized, &words).ok()) return 1;
  Report("ceiling: NFC + pre-tokenizer only", Seconds(start), text.size(), words.size(), "words");

  std::vector<TokenId> ids;
  for (const char* pass : {"encode, cold word cache", "encode, warm word cache"}) {
    start = Clock::now();
    ids = *tok.Encode(text, false);
    Report(pass, Seconds(start), text.size(), ids.size());
  }
  start = Clock::now();
  const std::string decoded = tok.Decode(ids);
  Report("decode", Seconds(start), decoded.size(), ids.size());
  start = Clock::now();
  kvtier::engine::StreamDecoder stream(tok);
  size_t streamed = 0;
  for (const TokenId id : ids) streamed += stream.Push(id).size();
  streamed += stream.Finish().size();
  Report("decode, streaming one token at a time", Seconds(start), streamed, ids.size());
  if (streamed != decoded.size()) {
    std::fprintf(stderr, "%s: streamed decoding differs from Decode\n", family.c_str());
    return 1;
  }
  // SentencePiece-style files decode a literal "▁" in the text as a space: not an error.
  std::printf("  decode(encode(text)) %s NFC(text)\n", decoded == normalized ? "==" : "!=");
  const std::string word(1 << 20, 'a');
  start = Clock::now();
  const size_t n = tok.Encode(word, false)->size();
  Report("one 1 MiB word (\"aaa...\")", Seconds(start), word.size(), n);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> families(argv + 1, argv + argc);
  if (families.empty()) families = {"qwen3", "llama3_1", "mistral_nemo", "llama2"};
  const std::string text = BenchText();
  int rc = 0;
  for (const std::string& f : families) rc |= BenchFamily(f, text);
  return rc;
}
