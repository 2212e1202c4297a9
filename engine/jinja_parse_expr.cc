// jinja::Parse's expressions, with Jinja's precedence (loosest first): conditional, or, and,
// not, comparisons and `in`, + -, ~, * / // %, **, unary sign, then postfix access, filters and
// tests.
#include "engine/jinja_parser_internal.h"

namespace kvtier::engine::jinja::internal {

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

}  // namespace kvtier::engine::jinja::internal
