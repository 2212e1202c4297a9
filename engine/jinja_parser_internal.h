// The recursive-descent parser behind jinja::Parse (engine/jinja_parser.h), shared by its two
// halves: statements (jinja_parser.cc) and expressions (jinja_parse_expr.cc). Not for other use.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/jinja_ast.h"
#include "engine/jinja_lexer.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja::internal {

using Kind = Token::Kind;

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

}  // namespace kvtier::engine::jinja::internal
