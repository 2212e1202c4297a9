#include "engine/jinja_lexer.h"

#include <cstring>

#include "engine/utf8.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool IsNameStart(char c) { return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z'); }
bool IsDigit(char c) { return c >= '0' && c <= '9'; }

class Lexer {
 public:
  explicit Lexer(std::string source) : src_(std::move(source)) {}
  absl::StatusOr<std::vector<Token>> Run();

 private:
  absl::Status LexTag(Token::Kind begin, std::string_view end);
  absl::Status LexString(char quote);
  void LexNumber();
  void EmitText(std::string text, char sign, bool block_tag, int line);
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("chat template line {}: {}", line_, what));
  }
  void Advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < src_.size(); ++i) line_ += src_[pos_++] == '\n';
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool lstrip_next_ = false;   // the previous tag ended with '-': strip the next text's start
  bool line_starting_ = true;  // the next text starts a line (for lstrip_blocks)
  std::vector<Token> out_;
};

// Applies whitespace control to the text before a tag and emits it.
void Lexer::EmitText(std::string text, char sign, bool block_tag, int line) {
  if (lstrip_next_) {
    size_t i = 0;
    while (i < text.size() && IsSpace(text[i])) ++i;
    text.erase(0, i);
  }
  if (sign == '-') {
    while (!text.empty() && IsSpace(text.back())) text.pop_back();
  } else if (sign != '+' && block_tag) {  // lstrip_blocks: spaces and tabs before a block tag
    const size_t nl = text.rfind('\n');
    const size_t l = nl == std::string::npos ? 0 : nl + 1;
    bool blank = l < text.size();
    for (size_t i = l; i < text.size(); ++i) blank = blank && IsSpace(text[i]);
    if ((l > 0 || line_starting_) && blank) text.erase(l);
  }
  if (!text.empty()) out_.push_back({Token::Kind::kText, std::move(text), line});
}

absl::StatusOr<std::vector<Token>> Lexer::Run() {
  while (true) {
    size_t tag = src_.find('{', pos_);
    while (tag != std::string::npos && tag + 1 < src_.size() &&
           std::strchr("{%#", src_[tag + 1]) == nullptr) {
      tag = src_.find('{', tag + 1);
    }
    if (tag == std::string::npos || tag + 1 >= src_.size()) tag = src_.size();
    const std::string text = src_.substr(pos_, tag - pos_);
    const char kind = tag < src_.size() ? src_[tag + 1] : '\0';
    const char sign = tag + 2 < src_.size() && (src_[tag + 2] == '-' || src_[tag + 2] == '+')
                          ? src_[tag + 2]
                          : '\0';
    const int text_line = line_;
    Advance(tag - pos_);
    EmitText(text, sign, kind == '%' || kind == '#', text_line);
    if (kind == '\0') break;
    Advance(sign ? 3 : 2);
    lstrip_next_ = false;
    if (kind == '#') {
      const size_t end = src_.find("#}", pos_);
      if (end == std::string::npos) return Error("unterminated comment");
      const bool strip = end > pos_ && src_[end - 1] == '-';
      Advance(end + 2 - pos_);
      lstrip_next_ = strip;
      line_starting_ = false;
      if (!strip && pos_ < src_.size() && src_[pos_] == '\n') {  // trim_blocks
        Advance(1);
        line_starting_ = true;
      }
      continue;
    }
    const bool expr = kind == '{';
    KVTIER_RETURN_IF_ERROR(
        LexTag(expr ? Token::Kind::kExprBegin : Token::Kind::kStmtBegin, expr ? "}}" : "%}"));
  }
  out_.push_back({Token::Kind::kEof, "", line_});
  return std::move(out_);
}

absl::Status Lexer::LexTag(Token::Kind begin, std::string_view end) {
  const bool expr = begin == Token::Kind::kExprBegin;
  out_.push_back({begin, "", line_});
  int depth = 0;  // open brackets: "}}" inside a dict literal does not end the tag
  static constexpr const char* kOps[] = {"//", "**", "==", "!=", "<=", ">="};
  while (true) {
    while (pos_ < src_.size() && IsSpace(src_[pos_])) Advance(1);
    if (pos_ >= src_.size()) return Error(fmt::format("unterminated tag (missing \"{}\")", end));
    const std::string_view rest = std::string_view(src_).substr(pos_);
    const bool dash_end =
        rest.size() > end.size() && rest[0] == '-' && rest.substr(1, end.size()) == end;
    if (depth == 0 && (dash_end || rest.substr(0, end.size()) == end)) {
      Advance(end.size() + (dash_end ? 1 : 0));
      out_.push_back({expr ? Token::Kind::kExprEnd : Token::Kind::kStmtEnd, "", line_});
      lstrip_next_ = dash_end;
      line_starting_ = false;
      if (!expr && !dash_end && pos_ < src_.size() && src_[pos_] == '\n') {  // trim_blocks
        Advance(1);
        line_starting_ = true;
      }
      return absl::OkStatus();
    }
    const char c = src_[pos_];
    if (c == '\'' || c == '"') {
      KVTIER_RETURN_IF_ERROR(LexString(c));
    } else if (IsDigit(c)) {
      LexNumber();
    } else if (IsNameStart(c)) {
      size_t n = 1;
      while (pos_ + n < src_.size() && (IsNameStart(src_[pos_ + n]) || IsDigit(src_[pos_ + n])))
        ++n;
      out_.push_back({Token::Kind::kName, src_.substr(pos_, n), line_});
      Advance(n);
    } else {
      std::string op(1, c);
      for (const char* two : kOps) {
        if (rest.substr(0, 2) == two) op = two;
      }
      if (op.size() == 1 && std::strchr("+-*/%~<>=.,:|()[]{}!", c) == nullptr) {
        return Error(fmt::format("unexpected character '{}'", c));
      }
      depth += (c == '(' || c == '[' || c == '{') - (c == ')' || c == ']' || c == '}');
      out_.push_back({Token::Kind::kOp, op, line_});
      Advance(op.size());
    }
  }
}

absl::Status Lexer::LexString(char quote) {
  const int line = line_;
  Advance(1);
  std::string value;
  while (pos_ < src_.size() && src_[pos_] != quote) {
    char c = src_[pos_];
    if (c != '\\' || pos_ + 1 >= src_.size()) {
      value += c;
      Advance(1);
      continue;
    }
    const char e = src_[pos_ + 1];
    Advance(2);
    switch (e) {
      case 'n':
        value += '\n';
        break;
      case 't':
        value += '\t';
        break;
      case 'r':
        value += '\r';
        break;
      case '0':
        value += '\0';
        break;
      case '\\':
      case '\'':
      case '"':
        value += e;
        break;
      case 'u':
      case 'x': {
        const size_t n = e == 'u' ? 4 : 2;
        if (pos_ + n > src_.size()) return Error("truncated escape in string");
        AppendUtf8(static_cast<char32_t>(std::stoul(src_.substr(pos_, n), nullptr, 16)), &value);
        Advance(n);
        break;
      }
      default:
        value += '\\';
        value += e;  // Python keeps unknown escapes
    }
  }
  if (pos_ >= src_.size()) return Error("unterminated string");
  Advance(1);
  out_.push_back({Token::Kind::kString, std::move(value), line});
  return absl::OkStatus();
}

void Lexer::LexNumber() {
  size_t n = 0;
  while (pos_ + n < src_.size() && (IsDigit(src_[pos_ + n]) || src_[pos_ + n] == '_')) ++n;
  bool is_float = false;
  if (pos_ + n + 1 < src_.size() && src_[pos_ + n] == '.' && IsDigit(src_[pos_ + n + 1])) {
    is_float = true;
    ++n;
    while (pos_ + n < src_.size() && IsDigit(src_[pos_ + n])) ++n;
  }
  std::string digits;
  for (size_t i = 0; i < n; ++i) {
    if (src_[pos_ + i] != '_') digits += src_[pos_ + i];
  }
  out_.push_back({is_float ? Token::Kind::kFloat : Token::Kind::kInt, digits, line_});
  Advance(n);
}

}  // namespace

absl::StatusOr<std::vector<Token>> Lex(std::string_view source) {
  // Jinja reads the source line by line: "\r\n" and "\r" become "\n", and one trailing newline is
  // dropped (keep_trailing_newline=False).
  std::string src;
  src.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      src += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      src += source[i];
    }
  }
  if (!src.empty() && src.back() == '\n') src.pop_back();
  return Lexer(std::move(src)).Run();
}

}  // namespace kvtier::engine::jinja
