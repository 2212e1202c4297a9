#include "engine/decoder.h"

#include "engine/byte_level.h"
#include "engine/utf8.h"

namespace kvtier::engine {
namespace {

std::string ReplaceAll(std::string text,
                       const std::vector<std::pair<std::string, std::string>>& rs) {
  for (const auto& [from, to] : rs) {
    if (from.empty()) continue;
    std::string out;
    size_t begin = 0;
    for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, begin)) {
      out.append(text, begin, at - begin).append(to);
      begin = at + from.size();
    }
    text = out.append(text, begin, std::string::npos);
  }
  return text;
}

// `tokenizers`' ByteFallback: a token spelled exactly <0xXX> (two hex digits) is that byte.
int ByteOf(std::string_view token) {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int value = 0;
  for (const char c : token.substr(3, 2)) {
    const int digit = c >= '0' && c <= '9'   ? c - '0'
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                                             : -1;
    if (digit < 0) return -1;
    value = value * 16 + digit;
  }
  return value;
}

}  // namespace

Decoder Decoder::Create(const DecoderSpec& spec, const BpeModel& model,
                        const AddedVocabulary& added) {
  Decoder d;
  d.spec_ = spec;
  size_t limit = model.id_limit();
  for (const AddedToken& t : added.tokens()) limit = std::max(limit, size_t{t.id} + 1);
  d.pieces_.resize(limit);
  d.byte_of_.assign(limit, -1);
  auto set = [&](TokenId id, const std::string& token) {
    if (spec.byte_level) {  // a token with a character outside the alphabet is its own UTF-8
      d.pieces_[id] = ByteLevelToBytes(token).value_or(token);
      return;
    }
    d.pieces_[id] = ReplaceAll(token, spec.replacements);
    if (spec.byte_fallback) d.byte_of_[id] = static_cast<int16_t>(ByteOf(d.pieces_[id]));
  };
  for (size_t id = 0; id < model.id_limit(); ++id) {
    if (const std::string* token = model.IdToToken(static_cast<TokenId>(id))) {
      set(static_cast<TokenId>(id), *token);
    }
  }
  for (const AddedToken& t : added.tokens()) set(t.id, t.content);  // added tokens: their content
  return d;
}

std::string_view Decoder::Piece(TokenId id) const {
  return id < pieces_.size() ? std::string_view(pieces_[id]) : std::string_view();
}

std::string Decoder::FlushRun(State* state) const {
  std::string out;
  if (IsValidUtf8(state->pending)) {
    out = std::move(state->pending);
  } else {
    for (size_t i = 0; i < state->pending.size(); ++i) out.append(kReplacementChar);
  }
  state->pending.clear();
  return out;
}

std::string Decoder::Strip(State* state, std::string text) const {
  while (state->strip_left > 0 && !text.empty()) {
    if (text.compare(0, spec_.strip_content.size(), spec_.strip_content) != 0) {
      state->strip_left = 0;
      break;
    }
    text.erase(0, spec_.strip_content.size());
    --state->strip_left;
  }
  return text;
}

std::string Decoder::Push(State* state, TokenId id) const {
  if (id >= pieces_.size()) return std::string();
  if (spec_.byte_level) {
    // Bytes before an incomplete tail are final: later bytes cannot change how they decode.
    state->pending.append(pieces_[id]);
    const size_t hold = IncompleteSuffixLength(state->pending);
    const std::string_view ready =
        std::string_view(state->pending).substr(0, state->pending.size() - hold);
    std::string out = IsValidUtf8(ready) ? std::string(ready) : LossyUtf8(ready);
    state->pending.erase(0, state->pending.size() - hold);
    return Strip(state, std::move(out));
  }
  if (byte_of_[id] >= 0) {  // the whole run decides: held until it ends
    state->pending.push_back(static_cast<char>(byte_of_[id]));
    return std::string();
  }
  return Strip(state, FlushRun(state) + pieces_[id]);
}

std::string Decoder::Finish(State* state) const {
  std::string out = spec_.byte_level ? LossyUtf8(state->pending) : FlushRun(state);
  state->pending.clear();
  return Strip(state, std::move(out));
}

}  // namespace kvtier::engine
