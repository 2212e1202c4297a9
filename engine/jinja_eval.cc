// Interpreter's expressions (engine/jinja_interpreter.h).
#include <cmath>

#include "engine/jinja_builtins.h"
#include "engine/jinja_interpreter.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

absl::StatusOr<Value> Arithmetic(const std::string& op, const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    return absl::InvalidArgumentError(fmt::format("'{}' on an undefined value", op));
  }
  if (op == "+" && a.is_string() && b.is_string()) return Value(a.string() + b.string());
  if (op == "+" && a.is_array() && b.is_array()) {
    Array out = a.array();
    out.insert(out.end(), b.array().begin(), b.array().end());
    return Value::FromArray(std::move(out));
  }
  if (op == "*" && a.is_string() && b.kind() == Value::Kind::kInt) {
    std::string out;
    for (int64_t i = 0; i < b.integer(); ++i) out += a.string();
    return Value(std::move(out));
  }
  if (!a.is_number() || !b.is_number()) {
    return absl::InvalidArgumentError(
        fmt::format("unsupported operand types for {}: {} and {}", op, a.TypeName(), b.TypeName()));
  }
  const bool ints = a.kind() == Value::Kind::kInt && b.kind() == Value::Kind::kInt;
  const int64_t x = a.integer(), y = b.integer();
  const double p = a.number(), q = b.number();
  if ((op == "/" || op == "//" || op == "%") && q == 0)
    return absl::InvalidArgumentError("division by zero");
  if (op == "+") return ints ? Value(x + y) : Value(p + q);
  if (op == "-") return ints ? Value(x - y) : Value(p - q);
  if (op == "*") return ints ? Value(x * y) : Value(p * q);
  if (op == "/") return Value(p / q);
  if (op == "//")
    return ints ? Value(static_cast<int64_t>(std::floor(p / q))) : Value(std::floor(p / q));
  if (op == "%") return ints ? Value(((x % y) + y) % y) : Value(p - q * std::floor(p / q));
  if (op == "**")
    return ints && y >= 0 ? Value(static_cast<int64_t>(std::pow(p, q))) : Value(std::pow(p, q));
  return absl::InvalidArgumentError(fmt::format("unknown operator {}", op));
}

}  // namespace

absl::StatusOr<Value> Interpreter::Eval(const Expr& e) {
  switch (e.kind) {
    case Expr::Kind::kLiteral:
      return e.literal;
    case Expr::Kind::kName:
      return Lookup(e.name);
    case Expr::Kind::kAttr:
    case Expr::Kind::kItem:
    case Expr::Kind::kSlice:
      return EvalAccess(e);
    case Expr::Kind::kCall:
      return EvalCall(e);
    case Expr::Kind::kFilter: {
      KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      KVTIER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      return ApplyFilter(e.name, v, args);
    }
    case Expr::Kind::kTest: {
      KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      KVTIER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
      KVTIER_ASSIGN_OR_RETURN(bool pass, ApplyTest(e.name, v, args.positional));
      return Value(pass != e.negated);
    }
    case Expr::Kind::kUnary: {
      KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*e.children[0]));
      if (e.name == "not") return Value(!v.Truthy());
      if (v.kind() == Value::Kind::kInt) return Value(e.name == "-" ? -v.integer() : v.integer());
      if (v.kind() == Value::Kind::kFloat) return Value(e.name == "-" ? -v.number() : v.number());
      return absl::InvalidArgumentError(
          fmt::format("bad operand type for unary {}: {}", e.name, v.TypeName()));
    }
    case Expr::Kind::kBinary:
      return EvalBinary(e);
    case Expr::Kind::kCond: {
      KVTIER_ASSIGN_OR_RETURN(Value c, Eval(*e.children[1]));
      if (c.Truthy()) return Eval(*e.children[0]);
      return e.children[2] ? Eval(*e.children[2]) : Value();
    }
    case Expr::Kind::kList: {
      Array items;
      for (const ExprPtr& c : e.children) {
        KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*c));
        items.push_back(std::move(v));
      }
      return Value::FromArray(std::move(items), /*is_tuple=*/e.negated);
    }
    case Expr::Kind::kDict: {
      Value d = Value::FromObject({});
      for (size_t i = 0; i + 1 < e.children.size(); i += 2) {
        KVTIER_ASSIGN_OR_RETURN(Value k, Eval(*e.children[i]));
        KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i + 1]));
        d.Set(k.Str(), std::move(v));
      }
      return d;
    }
  }
  return Value();
}

absl::StatusOr<Value> Interpreter::EvalAccess(const Expr& e) {
  KVTIER_ASSIGN_OR_RETURN(Value obj, Eval(*e.children[0]));
  if (obj.is_undefined()) {
    const std::string what =
        e.children[0]->kind == Expr::Kind::kName ? "'" + e.children[0]->name + "'" : "a value";
    return absl::InvalidArgumentError(fmt::format("{} is undefined", what));
  }
  if (e.kind == Expr::Kind::kAttr) return obj.Get(e.name);
  if (e.kind == Expr::Kind::kSlice) {
    Value parts[3];
    for (int k = 0; k < 3; ++k) {
      if (e.children[k + 1]) {
        KVTIER_ASSIGN_OR_RETURN(parts[k], Eval(*e.children[k + 1]));
      }
    }
    return Slice(obj, parts[0], parts[1], parts[2]);
  }
  KVTIER_ASSIGN_OR_RETURN(Value key, Eval(*e.children[1]));
  if (obj.is_object()) return key.is_string() ? obj.Get(key.string()) : Value();
  if ((obj.is_array() || obj.is_string()) && key.kind() == Value::Kind::kInt) {
    const int64_t n = Length(obj);
    const int64_t i = key.integer() < 0 ? key.integer() + n : key.integer();
    if (i < 0 || i >= n) return Value();
    return obj.is_array() ? obj.array()[i] : Slice(obj, Value(i), Value(i + 1), Value());
  }
  return Value();
}

absl::StatusOr<Value> Interpreter::EvalBinary(const Expr& e) {
  const std::string& op = e.name;
  KVTIER_ASSIGN_OR_RETURN(Value a, Eval(*e.children[0]));
  if (op == "and") return a.Truthy() ? Eval(*e.children[1]) : a;
  if (op == "or") return a.Truthy() ? a : Eval(*e.children[1]);
  KVTIER_ASSIGN_OR_RETURN(Value b, Eval(*e.children[1]));
  if (op == "==") return Value(a.Equals(b));
  if (op == "!=") return Value(!a.Equals(b));
  if (op == "in" || op == "not in") {
    KVTIER_ASSIGN_OR_RETURN(bool in, Contains(b, a));
    return Value(in == (op == "in"));
  }
  if (op == "<" || op == ">" || op == "<=" || op == ">=") {
    KVTIER_ASSIGN_OR_RETURN(int c, Compare(a, b));
    return Value(op == "<" ? c < 0 : op == ">" ? c > 0 : op == "<=" ? c <= 0 : c >= 0);
  }
  if (op == "~") return Value(a.Str() + b.Str());
  return Arithmetic(op, a, b);
}

absl::StatusOr<CallArgs> Interpreter::EvalArgs(const Expr& e, size_t first) {
  CallArgs args;
  for (size_t i = first; i < e.children.size(); ++i) {
    KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*e.children[i]));
    args.positional.push_back(std::move(v));
  }
  for (const auto& [k, x] : e.kwargs) {
    KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*x));
    args.keyword.emplace_back(k, std::move(v));
  }
  return args;
}

absl::StatusOr<Value> Interpreter::EvalCall(const Expr& e) {
  const Expr& callee = *e.children[0];
  KVTIER_ASSIGN_OR_RETURN(CallArgs args, EvalArgs(e, 1));
  Value fn;
  if (callee.kind == Expr::Kind::kAttr) {  // a method, or a function stored in a dict
    KVTIER_ASSIGN_OR_RETURN(Value obj, Eval(*callee.children[0]));
    if (obj.is_undefined())
      return absl::InvalidArgumentError(
          fmt::format("cannot call '{}' of an undefined value", callee.name));
    bool found = false;
    KVTIER_ASSIGN_OR_RETURN(Value result, CallMethod(obj, callee.name, args, &found));
    if (found) return result;
    fn = obj.Get(callee.name);
  } else {
    KVTIER_ASSIGN_OR_RETURN(fn, Eval(callee));
  }
  if (fn.kind() != Value::Kind::kFunction) {
    const std::string name = callee.kind == Expr::Kind::kName || callee.kind == Expr::Kind::kAttr
                                 ? callee.name
                                 : "value";
    return absl::InvalidArgumentError(
        fmt::format("'{}' is not callable ({})", name, fn.TypeName()));
  }
  return fn.function()(args);
}

}  // namespace kvtier::engine::jinja
