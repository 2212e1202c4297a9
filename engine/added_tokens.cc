#include "engine/added_tokens.h"

#include "engine/utf8.h"

namespace kvtier::engine {
namespace {

// Rust's char::is_whitespace for the characters real text uses around added tokens.
bool IsSpaceAt(std::string_view s, size_t pos, size_t* len) {
  size_t next = pos;
  const char32_t c = NextCodePoint(s, &next);
  *len = next - pos;
  return (c >= 0x09 && c <= 0x0D) || c == 0x20 || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// A word character for single_word: ASCII alphanumerics, '_' and every non-ASCII character.
bool IsWordByte(char c) {
  const auto u = static_cast<unsigned char>(c);
  return u >= 0x80 || u == '_' || (u >= '0' && u <= '9') ||
         ((u | 0x20) >= 'a' && (u | 0x20) <= 'z');
}

}  // namespace

AddedVocabulary::AddedVocabulary(std::vector<AddedToken> tokens) : tokens_(std::move(tokens)) {
  for (Trie& t : tries_) t.token.push_back(-1);
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const AddedToken& tok = tokens_[i];
    by_id_.emplace(tok.id, i);
    by_content_.emplace(tok.content, tok.id);
    if (tok.content.empty()) continue;
    has_normalized_ = has_normalized_ || tok.normalized;
    Trie& trie = tries_[tok.normalized ? 1 : 0];
    trie.first_byte[static_cast<uint8_t>(tok.content[0])] = true;
    uint32_t node = 0;
    for (const char c : tok.content) {
      const uint64_t key = (uint64_t{node} << 8) | static_cast<uint8_t>(c);
      auto [it, inserted] = trie.edges.try_emplace(key, static_cast<uint32_t>(trie.token.size()));
      if (inserted) trie.token.push_back(-1);
      node = it->second;
    }
    if (trie.token[node] < 0) trie.token[node] = static_cast<int32_t>(i);  // first one wins
  }
}

int32_t AddedVocabulary::LongestAt(const Trie& trie, std::string_view text, size_t pos,
                                   size_t* end) const {
  int32_t best = -1;
  uint32_t node = 0;
  for (size_t i = pos; i < text.size(); ++i) {
    const auto it = trie.edges.find((uint64_t{node} << 8) | static_cast<uint8_t>(text[i]));
    if (it == trie.edges.end()) break;
    node = it->second;
    if (trie.token[node] >= 0) {
      best = trie.token[node];
      *end = i + 1;
    }
  }
  return best;
}

bool AddedVocabulary::AcceptMatch(const AddedToken& t, std::string_view text, size_t begin,
                                  size_t end) const {
  if (!t.single_word) return true;
  const bool word_before = begin > 0 && IsWordByte(text[begin - 1]);
  const bool word_after = end < text.size() && IsWordByte(text[end]);
  return !word_before && !word_after;
}

void AddedVocabulary::Split(std::string_view text, bool normalized,
                            std::vector<TextSegment>* out) const {
  const Trie& trie = tries_[normalized ? 1 : 0];
  size_t emitted = 0;  // text before this offset is in `out` already
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = 0;
    const int32_t index =
        trie.first_byte[static_cast<uint8_t>(text[pos])] ? LongestAt(trie, text, pos, &end) : -1;
    if (index < 0 || !AcceptMatch(tokens_[index], text, pos, end)) {
      ++pos;
      continue;
    }
    const AddedToken& tok = tokens_[index];
    size_t begin = pos;
    if (tok.lstrip) {  // walk back over whitespace not yet emitted
      while (begin > emitted) {
        size_t p = begin - 1, len = 0;
        while (p > emitted && (static_cast<uint8_t>(text[p]) & 0xC0) == 0x80) --p;
        if (!IsSpaceAt(text, p, &len)) break;
        begin = p;
      }
    }
    if (tok.rstrip) {
      size_t len = 0;
      while (end < text.size() && IsSpaceAt(text, end, &len)) end += len;
    }
    if (begin > emitted) out->push_back({text.substr(emitted, begin - emitted), std::nullopt});
    out->push_back({text.substr(begin, end - begin), tok.id});
    emitted = pos = end;
  }
  if (emitted < text.size()) out->push_back({text.substr(emitted), std::nullopt});
}

const AddedToken* AddedVocabulary::Find(TokenId id) const {
  const auto it = by_id_.find(id);
  return it == by_id_.end() ? nullptr : &tokens_[it->second];
}

std::optional<TokenId> AddedVocabulary::IdOf(std::string_view content) const {
  const auto it = by_content_.find(content);
  if (it == by_content_.end()) return std::nullopt;
  return it->second;
}

bool AddedVocabulary::IsSpecial(TokenId id) const {
  const AddedToken* t = Find(id);
  return t != nullptr && t->special;
}

}  // namespace kvtier::engine
