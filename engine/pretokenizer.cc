#include "engine/pretokenizer.h"

#include "fmt/format.h"

namespace kvtier::engine {
namespace {

// GPT-2's pattern, which ByteLevel applies when use_regex is true.
constexpr std::string_view kGpt2Pattern =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

// A piece of the text being split and whether it is a match of the step's pattern.
struct Piece {
  size_t begin, end;
  bool match;
};

}  // namespace

absl::StatusOr<PreTokenizer> PreTokenizer::Create(const std::vector<PreTokenizerStep>& steps) {
  PreTokenizer p;
  for (size_t i = 0; i < steps.size(); ++i) {
    const PreTokenizerStep& s = steps[i];
    Step step;
    std::string pattern = s.pattern;
    bool regex = s.pattern_is_regex;
    if (s.kind == PreTokenizerStep::Kind::kByteLevel) {
      p.byte_level_ = true;
      if (s.add_prefix_space && i != 0) {
        return absl::UnimplementedError(fmt::format(
            "pre_tokenizer step {}: ByteLevel with add_prefix_space after another step", i));
      }
      p.add_prefix_space_ = s.add_prefix_space;
      if (!s.use_regex) {
        p.steps_.push_back(step);
        continue;
      }
      pattern = std::string(kGpt2Pattern);
      regex = true;
    } else if (s.kind == PreTokenizerStep::Kind::kDigits) {
      pattern = s.individual_digits ? R"(\p{N})" : R"(\p{N}+)";
      regex = true;
    } else {
      step.behavior = s.behavior;
      step.invert = s.invert;
    }
    auto compiled = Regex::Compile(pattern, !regex);
    if (!compiled.ok()) {
      return absl::InvalidArgumentError(
          fmt::format("pre_tokenizer step {}: {}", i, std::string(compiled.status().message())));
    }
    step.regex = std::move(compiled).value();
    p.steps_.push_back(std::move(step));
  }
  return p;
}

absl::Status PreTokenizer::Split(std::string_view text,
                                 std::vector<std::string_view>* words) const {
  std::vector<std::string_view> current{text}, next;
  for (const Step& step : steps_) {
    if (step.regex == nullptr) continue;
    next.clear();
    for (const std::string_view piece : current) {
      KVTIER_RETURN_IF_ERROR(ApplyStep(step, piece, &next));
    }
    current.swap(next);
  }
  for (const std::string_view w : current) {
    if (!w.empty()) words->push_back(w);
  }
  return absl::OkStatus();
}

absl::Status PreTokenizer::ApplyStep(const Step& step, std::string_view piece,
                                     std::vector<std::string_view>* out) const {
  std::vector<Piece> pieces;
  size_t last = 0;
  KVTIER_RETURN_IF_ERROR(step.regex->FindAll(piece, [&](size_t begin, size_t end) {
    if (begin > last) pieces.push_back({last, begin, step.invert});
    pieces.push_back({begin, end, !step.invert});
    last = end;
  }));
  if (last < piece.size()) pieces.push_back({last, piece.size(), step.invert});
  // Merging joins a delimiter to its neighbour; `pending` holds the start of a piece still open.
  size_t pending = std::string::npos;
  for (const Piece& p : pieces) {
    switch (step.behavior) {
      case SplitBehavior::kIsolated:
        out->push_back(piece.substr(p.begin, p.end - p.begin));
        break;
      case SplitBehavior::kRemoved:
        if (!p.match) out->push_back(piece.substr(p.begin, p.end - p.begin));
        break;
      case SplitBehavior::kMergedWithPrevious:
        if (p.match && !out->empty() && pending != std::string::npos) {
          out->back() = piece.substr(pending, p.end - pending);
        } else {
          out->push_back(piece.substr(p.begin, p.end - p.begin));
        }
        pending = p.match ? std::string::npos : p.begin;
        break;
      case SplitBehavior::kMergedWithNext:
        if (p.match) {  // only the last of consecutive matches joins the next piece
          if (pending != std::string::npos)
            out->push_back(piece.substr(pending, p.begin - pending));
          pending = p.begin;
        } else {
          const size_t begin = pending == std::string::npos ? p.begin : pending;
          out->push_back(piece.substr(begin, p.end - begin));
          pending = std::string::npos;
        }
        break;
    }
  }
  if (step.behavior == SplitBehavior::kMergedWithNext && pending != std::string::npos) {
    out->push_back(piece.substr(pending));
  }
  return absl::OkStatus();
}

}  // namespace kvtier::engine
