#include "engine/bpe.h"

#include <queue>

#include "engine/byte_level.h"
#include "engine/utf8.h"
#include "fmt/format.h"

namespace kvtier::engine {
namespace {

// The symbols of a word while it merges: a doubly linked list over a vector, as in `tokenizers`'
// Word, so a merge is O(1) and stale heap entries are recognised instead of removed.
struct Symbol {
  TokenId id;
  int prev, next;
  bool alive;
};

struct Candidate {
  uint32_t rank;
  int pos;
  TokenId id;
  // std::priority_queue pops the largest: make that the lowest rank, then the leftmost position.
  bool operator<(const Candidate& o) const { return rank != o.rank ? rank > o.rank : pos > o.pos; }
};

}  // namespace

absl::StatusOr<std::unique_ptr<BpeModel>> BpeModel::Create(const BpeSpec& spec) {
  auto m = std::unique_ptr<BpeModel>(new BpeModel());
  m->byte_level_ = spec.byte_level;
  m->ignore_merges_ = spec.ignore_merges;
  m->byte_fallback_ = spec.byte_fallback;
  m->fuse_unk_ = spec.fuse_unk;
  m->by_text_.reserve(spec.vocab.size());
  m->symbols_.reserve(spec.vocab.size());
  for (const auto& [text, id] : spec.vocab) {
    if (id >= m->tokens_.size()) m->tokens_.resize(size_t{id} + 1);
    if (m->tokens_[id].has_value()) {
      return absl::InvalidArgumentError(fmt::format("model.vocab: id {} is used twice", id));
    }
    m->tokens_[id] = text;
    m->by_text_.emplace(text, id);
    // Byte-level input can only ever spell entries of the byte-level alphabet.
    std::optional<std::string> bytes = spec.byte_level ? ByteLevelToBytes(text) : text;
    if (bytes.has_value()) m->symbols_.emplace(*bytes, id);
  }
  for (int b = 0; b < 256; ++b) {
    const std::string byte(1, static_cast<char>(b));
    if (auto it = m->symbols_.find(byte); it != m->symbols_.end()) m->byte_ids_[b] = it->second;
    if (auto it = m->by_text_.find(fmt::format("<0x{:02X}>", b)); it != m->by_text_.end()) {
      m->fallback_ids_[b] = it->second;
    }
  }
  if (spec.unk_token.has_value()) {
    m->unk_ = m->TokenToId(*spec.unk_token);
    if (!m->unk_.has_value()) {
      return absl::InvalidArgumentError(
          fmt::format("model.unk_token \"{}\" is not in model.vocab", *spec.unk_token));
    }
  }
  m->merges_.reserve(spec.merges.size());
  for (size_t rank = 0; rank < spec.merges.size(); ++rank) {
    const auto& [left, right] = spec.merges[rank];
    const auto a = m->TokenToId(left), b = m->TokenToId(right), ab = m->TokenToId(left + right);
    if (!a || !b || !ab) {
      return absl::InvalidArgumentError(
          fmt::format("model.merges[{}] \"{} {}\": a part or the result is not in model.vocab",
                      rank, left, right));
    }
    // The first (lowest-ranked) occurrence of a pair wins, as in `tokenizers`.
    m->merges_.try_emplace(PairKey(*a, *b), Merge{static_cast<uint32_t>(rank), *ab});
  }
  return m;
}

std::optional<TokenId> BpeModel::TokenToId(std::string_view token) const {
  const auto it = by_text_.find(token);
  if (it == by_text_.end()) return std::nullopt;
  return it->second;
}

const std::string* BpeModel::IdToToken(TokenId id) const {
  if (id >= tokens_.size() || !tokens_[id].has_value()) return nullptr;
  return &*tokens_[id];
}

void BpeModel::InitialSymbols(std::string_view word, std::vector<TokenId>* symbols) const {
  bool last_unk = false;
  size_t pos = 0;
  while (pos < word.size()) {
    const size_t begin = pos;
    std::optional<TokenId> id;
    if (byte_level_) {
      id = byte_ids_[static_cast<uint8_t>(word[pos++])];
    } else {
      NextCodePoint(word, &pos);
      if (auto it = symbols_.find(word.substr(begin, pos - begin)); it != symbols_.end()) {
        id = it->second;
      }
    }
    if (id.has_value()) {
      symbols->push_back(*id);
      last_unk = false;
      continue;
    }
    const std::string_view bytes = word.substr(begin, pos - begin);
    bool all_bytes = byte_fallback_;
    for (const char c : bytes) all_bytes = all_bytes && fallback_ids_[static_cast<uint8_t>(c)];
    if (all_bytes) {
      for (const char c : bytes) symbols->push_back(*fallback_ids_[static_cast<uint8_t>(c)]);
      last_unk = false;
    } else if (unk_.has_value() && !(fuse_unk_ && last_unk)) {
      symbols->push_back(*unk_);
      last_unk = true;
    }
  }
}

void BpeModel::MergeAll(std::vector<TokenId>* ids) const {
  const int n = static_cast<int>(ids->size());
  std::vector<Symbol> sym(n);
  std::vector<Candidate> heap_storage;
  heap_storage.reserve(n);
  std::priority_queue<Candidate> heap(std::less<Candidate>(), std::move(heap_storage));
  for (int i = 0; i < n; ++i) sym[i] = Symbol{(*ids)[i], i - 1, i + 1 < n ? i + 1 : -1, true};
  auto push_pair = [&](int pos) {
    const int next = sym[pos].next;
    if (next < 0) return;
    if (auto it = merges_.find(PairKey(sym[pos].id, sym[next].id)); it != merges_.end()) {
      heap.push(Candidate{it->second.rank, pos, it->second.id});
    }
  };
  for (int i = 0; i + 1 < n; ++i) push_pair(i);
  while (!heap.empty()) {
    const Candidate top = heap.top();
    heap.pop();
    Symbol& left = sym[top.pos];
    if (!left.alive || left.next < 0) continue;
    Symbol& right = sym[left.next];
    const auto it = merges_.find(PairKey(left.id, right.id));
    if (it == merges_.end() || it->second.id != top.id) continue;  // a stale entry
    left.id = top.id;
    right.alive = false;
    left.next = right.next;
    if (right.next >= 0) sym[right.next].prev = top.pos;
    if (left.prev >= 0) push_pair(left.prev);
    push_pair(top.pos);
  }
  ids->clear();
  for (const Symbol& s : sym) {
    if (s.alive) ids->push_back(s.id);
  }
}

void BpeModel::EncodeWord(std::string_view word, std::vector<TokenId>* out) const {
  if (ignore_merges_) {
    if (auto it = symbols_.find(word); it != symbols_.end()) {
      out->push_back(it->second);
      return;
    }
  }
  const bool cacheable = word.size() <= kCacheWordBytes;
  if (cacheable) {
    absl::ReaderMutexLock lock(&cache_mu_);
    if (auto it = cache_.find(word); it != cache_.end()) {
      out->insert(out->end(), it->second.begin(), it->second.end());
      return;
    }
  }
  std::vector<TokenId> ids;
  ids.reserve(word.size());
  InitialSymbols(word, &ids);
  MergeAll(&ids);
  out->insert(out->end(), ids.begin(), ids.end());
  if (cacheable) {
    absl::WriterMutexLock lock(&cache_mu_);
    if (cache_.size() < kCacheEntries) cache_.emplace(word, std::move(ids));
  }
}

}  // namespace kvtier::engine
