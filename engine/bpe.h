// The BPE model of a tokenizer.json ("model": {"type": "BPE", ...}), with Hugging Face
// `tokenizers`' semantics: a word's symbols (its bytes for byte-level files, else its characters)
// merge by rank, the lowest-ranked pair first and, among equal ranks, the leftmost; `ignore_merges`
// emits a word that is itself a vocabulary entry whole; a symbol missing from the vocabulary
// becomes its <0xXX> byte tokens (`byte_fallback`), else the unknown token (fused when `fuse_unk`),
// else nothing. Merging is O(n log n) in the word's length (a heap, not rescans), and results for
// short words are cached.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "common/status.h"
#include "engine/string_map.h"

namespace kvtier::engine {

using TokenId = uint32_t;

struct BpeSpec {
  std::vector<std::pair<std::string, TokenId>> vocab;       // token text as the file spells it
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  bool byte_level = false;  // vocabulary spelled in the byte-level alphabet; symbols are bytes
  bool ignore_merges = false;
  bool byte_fallback = false;
  bool fuse_unk = false;
  std::optional<std::string> unk_token;
};

// Thread-safe: the vocabulary is immutable after Create; the word cache is locked.
class BpeModel {
 public:
  // An error names the merge (its rank) whose parts or result are not in the vocabulary, or a
  // duplicate id.
  static absl::StatusOr<std::unique_ptr<BpeModel>> Create(const BpeSpec& spec);

  // Appends the ids of `word` (raw bytes for byte-level models, else UTF-8 text) to `out`.
  void EncodeWord(std::string_view word, std::vector<TokenId>* out) const;

  // The id of a vocabulary entry spelled as in the file, if any.
  std::optional<TokenId> TokenToId(std::string_view token) const;
  // The entry of `id` as the file spells it, or null when `id` is not in the vocabulary.
  const std::string* IdToToken(TokenId id) const;
  // One more than the largest id of the vocabulary.
  size_t id_limit() const { return tokens_.size(); }

 private:
  struct Merge {
    uint32_t rank;
    TokenId id;
  };
  static uint64_t PairKey(TokenId a, TokenId b) { return (uint64_t{a} << 32) | b; }
  void InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const;
  void MergeAll(std::vector<TokenId>* symbols) const;

  std::vector<std::optional<std::string>> tokens_;  // id -> text as in the file
  StringMap<TokenId> by_text_;                      // text as in the file -> id
  StringMap<TokenId> symbols_;                      // raw bytes (or UTF-8) -> id
  absl::flat_hash_map<uint64_t, Merge> merges_;
  std::optional<TokenId> byte_ids_[256];  // single-byte symbols, for speed
  std::optional<TokenId> fallback_ids_[256];
  std::optional<TokenId> unk_;
  bool byte_level_ = false, ignore_merges_ = false, byte_fallback_ = false, fuse_unk_ = false;

  static constexpr size_t kCacheWordBytes = 64;
  static constexpr size_t kCacheEntries = 1 << 18;
  mutable absl::Mutex cache_mu_;
  mutable StringMap<std::vector<TokenId>> cache_ ABSL_GUARDED_BY(cache_mu_);
};

}  // namespace kvtier::engine
