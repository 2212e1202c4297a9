#include "engine/jinja_parser.h"

#include <set>

#include "engine/jinja_lexer.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

using Kind = Token::Kind;

Stmt MakeStmt(Stmt::Kind kind, int line) {
  Stmt s;
  s.kind = kind;
  s.line = line;
  return s;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  // Statements until one of `ends` (a statement name such as "endif") or the end of input.
  absl::Status Body(std::vector<Stmt>* out, const std::set<std::string>& ends, std::string* end);

 private:
  const Token& Peek(size_t k = 0) const { return t_[std::min(i_ + k, t_.size() - 1)]; }
  bool IsOp(std::string_view op, size_t k = 0) const {
    return Peek(k).kind == Kind::kOp && Peek(k).text == op;
  }
  bool IsName(std::string_view n, size_t k = 0) const {
    return Peek(k).kind == Kind::kName && Peek(k).text == n;
  }
  absl::Status Error(std::string_view what) const {
    return absl::InvalidArgumentError(fmt::format("chat template line {}: {}", Peek().line, what));
  }
  absl::Status Expect(Kind kind, std::string_view text, std::string_view what) {
    if (Peek().kind != kind || (!text.empty() && Peek().text != text)) {
      return Error(fmt::format("expected {}, found \"{}\"", what, Peek().text));
    }
    ++i_;
    return absl::OkStatus();
  }
  absl::StatusOr<std::string> Name() {
    if (Peek().kind != Kind::kName)
      return Error(fmt::format("expected a name, found \"{}\"", Peek().text));
    return t_[i_++].text;
  }

  absl::Status Statement(std::vector<Stmt>* out, const std::set<std::string>& ends,
                         std::string* end, bool* done);
  absl::Status If(Stmt* s);
  absl::Status For(Stmt* s);
  absl::Status Set(Stmt* s);
  absl::Status Macro(Stmt* s);

  absl::StatusOr<ExprPtr> Expression(bool allow_cond = true);
  absl::StatusOr<ExprPtr> Or();
  absl::StatusOr<ExprPtr> And();
  absl::StatusOr<ExprPtr> Not();
  absl::StatusOr<ExprPtr> Compare();
  absl::StatusOr<ExprPtr> Binary(int level);
  absl::StatusOr<ExprPtr> Unary(bool with_filter = true);
  absl::StatusOr<ExprPtr> Postfix(ExprPtr e);
  absl::StatusOr<ExprPtr> FilterOrTest(ExprPtr e);
  absl::StatusOr<ExprPtr> Primary();
  absl::Status Args(Expr* call);

  ExprPtr Make(Expr::Kind kind, int line, std::string name = "") {
    auto e = std::make_unique<Expr>();
    e->kind = kind;
    e->line = line;
    e->name = std::move(name);
    return e;
  }

  std::vector<Token> t_;
  size_t i_ = 0;
};

absl::Status Parser::Body(std::vector<Stmt>* out, const std::set<std::string>& ends,
                          std::string* end) {
  while (Peek().kind != Kind::kEof) {
    const Token& tok = Peek();
    if (tok.kind == Kind::kText) {
      Stmt s = MakeStmt(Stmt::Kind::kText, tok.line);
      s.text = tok.text;
      out->push_back(std::move(s));
      ++i_;
    } else if (tok.kind == Kind::kExprBegin) {
      ++i_;
      Stmt s = MakeStmt(Stmt::Kind::kOutput, tok.line);
      KVTIER_ASSIGN_OR_RETURN(s.expr, Expression());
      KVTIER_RETURN_IF_ERROR(Expect(Kind::kExprEnd, "", "\"}}\""));
      out->push_back(std::move(s));
    } else if (tok.kind == Kind::kStmtBegin) {
      bool done = false;
      KVTIER_RETURN_IF_ERROR(Statement(out, ends, end, &done));
      if (done) return absl::OkStatus();
    } else {
      return Error(fmt::format("unexpected \"{}\"", tok.text));
    }
  }
  if (!ends.empty()) return Error(fmt::format("missing \"{{% {} %}}\"", *ends.rbegin()));
  return absl::OkStatus();
}

absl::Status Parser::Statement(std::vector<Stmt>* out, const std::set<std::string>& ends,
                               std::string* end, bool* done) {
  ++i_;  // "{%"
  const int line = Peek().line;
  KVTIER_ASSIGN_OR_RETURN(std::string word, Name());
  if (ends.count(word)) {  // the caller parses what follows (elif's condition, the "%}")
    *end = word;
    *done = true;
    return absl::OkStatus();
  }
  Stmt s = MakeStmt(Stmt::Kind::kText, line);
  if (word == "if") {
    KVTIER_RETURN_IF_ERROR(If(&s));
  } else if (word == "for") {
    KVTIER_RETURN_IF_ERROR(For(&s));
  } else if (word == "set") {
    KVTIER_RETURN_IF_ERROR(Set(&s));
  } else if (word == "macro") {
    KVTIER_RETURN_IF_ERROR(Macro(&s));
  } else if (word == "break" || word == "continue") {
    s.kind = word == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue;
    KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
  } else if (word == "generation") {  // transformers' assistant-mask marker: render the body
    KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
    std::string e;
    KVTIER_RETURN_IF_ERROR(Body(out, {"endgeneration"}, &e));
    return Expect(Kind::kStmtEnd, "", "\"%}\"");
  } else {
    return absl::InvalidArgumentError(
        fmt::format("chat template line {}: unsupported or unexpected tag \"{}\"", line, word));
  }
  out->push_back(std::move(s));
  return absl::OkStatus();
}

absl::Status Parser::If(Stmt* s) {
  s->kind = Stmt::Kind::kIf;
  std::string end = "elif";
  while (end == "elif") {
    KVTIER_ASSIGN_OR_RETURN(ExprPtr cond, Expression());
    KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
    std::vector<Stmt> body;
    KVTIER_RETURN_IF_ERROR(Body(&body, {"elif", "else", "endif"}, &end));
    s->branches.emplace_back(std::move(cond), std::move(body));
  }
  if (end == "else") {
    KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
    KVTIER_RETURN_IF_ERROR(Body(&s->else_body, {"endif"}, &end));
  }
  return Expect(Kind::kStmtEnd, "", "\"%}\"");
}

absl::Status Parser::For(Stmt* s) {
  s->kind = Stmt::Kind::kFor;
  do {
    KVTIER_ASSIGN_OR_RETURN(std::string target, Name());
    s->targets.push_back(std::move(target));
  } while (IsOp(",") && (++i_, true));
  KVTIER_RETURN_IF_ERROR(Expect(Kind::kName, "in", "\"in\""));
  KVTIER_ASSIGN_OR_RETURN(s->expr, Expression(/*allow_cond=*/false));
  if (IsName("if")) {
    ++i_;
    KVTIER_ASSIGN_OR_RETURN(s->filter, Expression(/*allow_cond=*/false));
  }
  if (IsName("recursive")) return Error("recursive loops are not supported");
  KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
  std::string end;
  KVTIER_RETURN_IF_ERROR(Body(&s->body, {"else", "endfor"}, &end));
  if (end == "else") {
    KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
    KVTIER_RETURN_IF_ERROR(Body(&s->else_body, {"endfor"}, &end));
  }
  return Expect(Kind::kStmtEnd, "", "\"%}\"");
}

absl::Status Parser::Set(Stmt* s) {
  KVTIER_ASSIGN_OR_RETURN(std::string name, Name());
  s->targets.push_back(std::move(name));
  if (IsOp(".")) {
    ++i_;
    KVTIER_ASSIGN_OR_RETURN(std::string attr, Name());
    s->targets.push_back(std::move(attr));
  }
  if (Peek().kind == Kind::kStmtEnd) {  // {% set x %}...{% endset %}
    ++i_;
    s->kind = Stmt::Kind::kSetBlock;
    std::string end;
    KVTIER_RETURN_IF_ERROR(Body(&s->body, {"endset"}, &end));
    return Expect(Kind::kStmtEnd, "", "\"%}\"");
  }
  s->kind = Stmt::Kind::kSet;
  KVTIER_RETURN_IF_ERROR(Expect(Kind::kOp, "=", "\"=\""));
  KVTIER_ASSIGN_OR_RETURN(s->expr, Expression());
  return Expect(Kind::kStmtEnd, "", "\"%}\"");
}

absl::Status Parser::Macro(Stmt* s) {
  s->kind = Stmt::Kind::kMacro;
  KVTIER_ASSIGN_OR_RETURN(std::string name, Name());
  s->targets.push_back(std::move(name));
  KVTIER_RETURN_IF_ERROR(Expect(Kind::kOp, "(", "\"(\""));
  while (!IsOp(")")) {
    KVTIER_ASSIGN_OR_RETURN(std::string param, Name());
    s->targets.push_back(std::move(param));
    ExprPtr def;
    if (IsOp("=")) {
      ++i_;
      KVTIER_ASSIGN_OR_RETURN(def, Expression());
    }
    s->defaults.push_back(std::move(def));
    if (!IsOp(")")) KVTIER_RETURN_IF_ERROR(Expect(Kind::kOp, ",", "\",\""));
  }
  ++i_;
  KVTIER_RETURN_IF_ERROR(Expect(Kind::kStmtEnd, "", "\"%}\""));
  std::string end;
  KVTIER_RETURN_IF_ERROR(Body(&s->body, {"endmacro"}, &end));
  return Expect(Kind::kStmtEnd, "", "\"%}\"");
}

absl::StatusOr<ExprPtr> Parser::Expression(bool allow_cond) {
  KVTIER_ASSIGN_OR_RETURN(ExprPtr e, Or());
  while (allow_cond && IsName("if")) {
    auto cond = Make(Expr::Kind::kCond, Peek().line);
    ++i_;
    cond->children.push_back(std::move(e));
    KVTIER_ASSIGN_OR_RETURN(ExprPtr test, Or());
    cond->children.push_back(std::move(test));
    ExprPtr otherwise;
    if (IsName("else")) {
      ++i_;
      KVTIER_ASSIGN_OR_RETURN(otherwise, Expression());
    }
    cond->children.push_back(std::move(otherwise));
    e = std::move(cond);
  }
  return e;
}

absl::StatusOr<ExprPtr> Parser::Or() {
  KVTIER_ASSIGN_OR_RETURN(ExprPtr e, And());
  while (IsName("or")) {
    auto b = Make(Expr::Kind::kBinary, Peek().line, "or");
    ++i_;
    b->children.push_back(std::move(e));
    KVTIER_ASSIGN_OR_RETURN(ExprPtr r, And());
    b->children.push_back(std::move(r));
    e = std::move(b);
  }
  return e;
}

absl::StatusOr<ExprPtr> Parser::And() {
  KVTIER_ASSIGN_OR_RETURN(ExprPtr e, Not());
  while (IsName("and")) {
    auto b = Make(Expr::Kind::kBinary, Peek().line, "and");
    ++i_;
    b->children.push_back(std::move(e));
    KVTIER_ASSIGN_OR_RETURN(ExprPtr r, Not());
    b->children.push_back(std::move(r));
    e = std::move(b);
  }
  return e;
}

absl::StatusOr<ExprPtr> Parser::Not() {
  if (!IsName("not")) return Compare();
  auto u = Make(Expr::Kind::kUnary, Peek().line, "not");
  ++i_;
  KVTIER_ASSIGN_OR_RETURN(ExprPtr x, Not());
  u->children.push_back(std::move(x));
  return u;
}

absl::StatusOr<ExprPtr> Parser::Compare() {
  KVTIER_ASSIGN_OR_RETURN(ExprPtr e, Binary(0));
  static const std::set<std::string> kOps = {"==", "!=", "<", ">", "<=", ">="};
  while (true) {
    std::string op;
    if (Peek().kind == Kind::kOp && kOps.count(Peek().text)) {
      op = Peek().text;
      ++i_;
    } else if (IsName("in")) {
      op = "in";
      ++i_;
    } else if (IsName("not") && IsName("in", 1)) {
      op = "not in";
      i_ += 2;
    } else {
      return e;
    }
    auto b = Make(Expr::Kind::kBinary, Peek().line, op);
    b->children.push_back(std::move(e));
    KVTIER_ASSIGN_OR_RETURN(ExprPtr r, Binary(0));
    b->children.push_back(std::move(r));
    e = std::move(b);
  }
}

// Levels, loosest first: + -, ~, * / // %, **.
absl::StatusOr<ExprPtr> Parser::Binary(int level) {
  static const std::vector<std::set<std::string>> kLevels = {
      {"+", "-"}, {"~"}, {"*", "/", "//", "%"}, {"**"}};
  if (level == static_cast<int>(kLevels.size())) return Unary();
  KVTIER_ASSIGN_OR_RETURN(ExprPtr e, Binary(level + 1));
  while (Peek().kind == Kind::kOp && kLevels[level].count(Peek().text)) {
    auto b = Make(Expr::Kind::kBinary, Peek().line, Peek().text);
    ++i_;
    b->children.push_back(std::move(e));
    KVTIER_ASSIGN_OR_RETURN(ExprPtr r, Binary(level + 1));
    b->children.push_back(std::move(r));
    e = std::move(b);
  }
  return e;
}

// As Jinja: "-x | f" is "(-x) | f", so a sign's operand takes no filters.
absl::StatusOr<ExprPtr> Parser::Unary(bool with_filter) {
  ExprPtr e;
  if (IsOp("-") || IsOp("+")) {
    e = Make(Expr::Kind::kUnary, Peek().line, Peek().text);
    ++i_;
    KVTIER_ASSIGN_OR_RETURN(ExprPtr x, Unary(/*with_filter=*/false));
    e->children.push_back(std::move(x));
  } else {
    KVTIER_ASSIGN_OR_RETURN(e, Primary());
  }
  KVTIER_ASSIGN_OR_RETURN(e, Postfix(std::move(e)));
  if (!with_filter) return e;
  return FilterOrTest(std::move(e));
}

absl::StatusOr<ExprPtr> Parser::Postfix(ExprPtr e) {
  while (true) {
    const int line = Peek().line;
    if (IsOp(".")) {
      ++i_;
      if (Peek().kind == Kind::kInt) {  // x.0 is x[0]
        auto item = Make(Expr::Kind::kItem, line);
        item->children.push_back(std::move(e));
        auto index = Make(Expr::Kind::kLiteral, line);
        index->literal = Value(static_cast<int64_t>(std::stoll(t_[i_++].text)));
        item->children.push_back(std::move(index));
        e = std::move(item);
        continue;
      }
      KVTIER_ASSIGN_OR_RETURN(std::string attr, Name());
      auto a = Make(Expr::Kind::kAttr, line, attr);
      a->children.push_back(std::move(e));
      e = std::move(a);
    } else if (IsOp("[")) {
      ++i_;
      ExprPtr parts[3];
      int colons = 0;
      while (!IsOp("]")) {
        if (IsOp(":")) {
          if (++colons > 2) return Error("a slice has at most two ':'");
          ++i_;
          continue;
        }
        KVTIER_ASSIGN_OR_RETURN(parts[colons], Expression());
      }
      ++i_;
      auto s = Make(colons ? Expr::Kind::kSlice : Expr::Kind::kItem, line);
      s->children.push_back(std::move(e));
      if (!colons && !parts[0]) return Error("empty subscript");
      for (int k = 0; k < (colons ? 3 : 1); ++k) s->children.push_back(std::move(parts[k]));
      e = std::move(s);
    } else if (IsOp("(")) {
      auto call = Make(Expr::Kind::kCall, line);
      call->children.push_back(std::move(e));
      KVTIER_RETURN_IF_ERROR(Args(call.get()));
      e = std::move(call);
    } else {
      return e;
    }
  }
}

absl::StatusOr<ExprPtr> Parser::FilterOrTest(ExprPtr e) {
  while (true) {
    const int line = Peek().line;
    if (IsOp("|")) {
      ++i_;
      KVTIER_ASSIGN_OR_RETURN(std::string name, Name());
      auto f = Make(Expr::Kind::kFilter, line, name);
      f->children.push_back(std::move(e));
      if (IsOp("(")) KVTIER_RETURN_IF_ERROR(Args(f.get()));
      e = std::move(f);
    } else if (IsName("is")) {
      ++i_;
      const bool negated = IsName("not") && (++i_, true);
      KVTIER_ASSIGN_OR_RETURN(std::string name, Name());
      auto t = Make(Expr::Kind::kTest, line, name);
      t->negated = negated;
      t->children.push_back(std::move(e));
      const Kind k = Peek().kind;
      if (IsOp("(")) {
        KVTIER_RETURN_IF_ERROR(Args(t.get()));
      } else if ((k == Kind::kName && !IsName("else") && !IsName("or") && !IsName("and") &&
                  !IsName("if")) ||
                 k == Kind::kString || k == Kind::kInt || k == Kind::kFloat || IsOp("[") ||
                 IsOp("{")) {
        KVTIER_ASSIGN_OR_RETURN(ExprPtr arg, Primary());
        KVTIER_ASSIGN_OR_RETURN(arg, Postfix(std::move(arg)));
        t->children.push_back(std::move(arg));
      }
      e = std::move(t);
    } else if (IsOp("(")) {
      auto call = Make(Expr::Kind::kCall, line);
      call->children.push_back(std::move(e));
      KVTIER_RETURN_IF_ERROR(Args(call.get()));
      e = std::move(call);
    } else {
      return e;
    }
  }
}

absl::Status Parser::Args(Expr* call) {
  ++i_;  // "("
  while (!IsOp(")")) {
    if (Peek().kind == Kind::kName && IsOp("=", 1)) {
      std::string key = t_[i_].text;
      i_ += 2;
      KVTIER_ASSIGN_OR_RETURN(ExprPtr v, Expression());
      call->kwargs.emplace_back(std::move(key), std::move(v));
    } else {
      if (!call->kwargs.empty()) return Error("a positional argument follows a keyword argument");
      KVTIER_ASSIGN_OR_RETURN(ExprPtr v, Expression());
      call->children.push_back(std::move(v));
    }
    if (!IsOp(")")) KVTIER_RETURN_IF_ERROR(Expect(Kind::kOp, ",", "\",\" or \")\""));
  }
  ++i_;
  return absl::OkStatus();
}

absl::StatusOr<ExprPtr> Parser::Primary() {
  const Token& tok = Peek();
  auto lit = Make(Expr::Kind::kLiteral, tok.line);
  if (tok.kind == Kind::kName) {
    ++i_;
    if (tok.text == "true" || tok.text == "True") return lit->literal = Value(true), std::move(lit);
    if (tok.text == "false" || tok.text == "False")
      return lit->literal = Value(false), std::move(lit);
    if (tok.text == "none" || tok.text == "None")
      return lit->literal = Value::None(), std::move(lit);
    return Make(Expr::Kind::kName, tok.line, tok.text);
  }
  if (tok.kind == Kind::kString) {
    std::string s;
    while (Peek().kind == Kind::kString) s += t_[i_++].text;  // "a" "b" is "ab"
    lit->literal = Value(std::move(s));
    return lit;
  }
  if (tok.kind == Kind::kInt || tok.kind == Kind::kFloat) {
    ++i_;
    if (tok.kind == Kind::kInt) {
      lit->literal = Value(static_cast<int64_t>(std::stoll(tok.text)));
    } else {
      lit->literal = Value(std::stod(tok.text));
    }
    return lit;
  }
  if (IsOp("(") || IsOp("[") || IsOp("{")) {
    const bool paren = IsOp("("), dict = IsOp("{");
    const std::string close = paren ? ")" : dict ? "}" : "]";
    ++i_;
    auto list = Make(dict ? Expr::Kind::kDict : Expr::Kind::kList, tok.line);
    bool comma = false;
    while (!IsOp(close)) {
      KVTIER_ASSIGN_OR_RETURN(ExprPtr item, Expression());
      list->children.push_back(std::move(item));
      if (dict) {
        KVTIER_RETURN_IF_ERROR(Expect(Kind::kOp, ":", "\":\""));
        KVTIER_ASSIGN_OR_RETURN(ExprPtr value, Expression());
        list->children.push_back(std::move(value));
      }
      if (IsOp(close)) break;
      KVTIER_RETURN_IF_ERROR(Expect(Kind::kOp, ",", fmt::format("\",\" or \"{}\"", close)));
      comma = true;
    }
    ++i_;
    if (paren && !comma && list->children.size() == 1) return std::move(list->children[0]);
    list->negated = paren;  // a tuple: printed as (a, b)
    return list;
  }
  return Error(fmt::format("unexpected \"{}\" in an expression", tok.text));
}

}  // namespace

absl::StatusOr<std::vector<Stmt>> Parse(std::string_view source) {
  KVTIER_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  Parser parser(std::move(tokens));
  std::vector<Stmt> out;
  std::string end;
  KVTIER_RETURN_IF_ERROR(parser.Body(&out, {}, &end));
  return out;
}

}  // namespace kvtier::engine::jinja
