#include "engine/jinja_parser.h"

#include "engine/jinja_parser_internal.h"

namespace kvtier::engine::jinja {
namespace internal {
namespace {

Stmt MakeStmt(Stmt::Kind kind, int line) {
  Stmt s;
  s.kind = kind;
  s.line = line;
  return s;
}

}  // namespace

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

}  // namespace internal

absl::StatusOr<std::vector<Stmt>> Parse(std::string_view source) {
  KVTIER_ASSIGN_OR_RETURN(std::vector<Token> tokens, Lex(source));
  internal::Parser parser(std::move(tokens));
  std::vector<Stmt> out;
  std::string end;
  KVTIER_RETURN_IF_ERROR(parser.Body(&out, {}, &end));
  return out;
}

}  // namespace kvtier::engine::jinja
