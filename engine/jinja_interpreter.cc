#include "engine/jinja_interpreter.h"

#include "absl/strings/match.h"
#include "engine/jinja_builtins.h"
#include "fmt/format.h"

namespace kvtier::engine::jinja {
namespace {

absl::Status AtLine(const absl::Status& s, int line) {
  if (s.ok() || absl::StartsWith(s.message(), "chat template line")) return s;
  return absl::Status(s.code(),
                      fmt::format("chat template line {}: {}", line, std::string(s.message())));
}

}  // namespace

Interpreter::Interpreter(const Object& variables) {
  scopes_.emplace_back();
  for (auto& [k, v] : Globals()) scopes_[0][k] = v;
  for (const auto& [k, v] : variables) scopes_[0][k] = v;
}

absl::StatusOr<std::string> Interpreter::Render(const std::vector<Stmt>& program) {
  std::string out;
  KVTIER_RETURN_IF_ERROR(Exec(program, &out));
  return out;
}

Value Interpreter::Lookup(const std::string& name) const {
  for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
    if (auto found = it->find(name); found != it->end()) return found->second;
  }
  return Value();
}

absl::Status Interpreter::Exec(const std::vector<Stmt>& body, std::string* out) {
  for (const Stmt& s : body) {
    KVTIER_RETURN_IF_ERROR(AtLine(ExecOne(s, out), s.line));
    if (flow_ != Flow::kNormal) return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Interpreter::ExecOne(const Stmt& s, std::string* out) {
  switch (s.kind) {
    case Stmt::Kind::kText:
      *out += s.text;
      return absl::OkStatus();
    case Stmt::Kind::kOutput: {
      KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      *out += v.Str();
      return absl::OkStatus();
    }
    case Stmt::Kind::kIf:
      for (const auto& [cond, body] : s.branches) {
        KVTIER_ASSIGN_OR_RETURN(Value c, Eval(*cond));
        if (c.Truthy()) return Exec(body, out);
      }
      return Exec(s.else_body, out);
    case Stmt::Kind::kFor:
      return ExecFor(s, out);
    case Stmt::Kind::kSet: {
      KVTIER_ASSIGN_OR_RETURN(Value v, Eval(*s.expr));
      return ExecSet(s, std::move(v));
    }
    case Stmt::Kind::kSetBlock: {
      std::string text;
      KVTIER_RETURN_IF_ERROR(Exec(s.body, &text));
      return ExecSet(s, Value(std::move(text)));
    }
    case Stmt::Kind::kMacro:
      Assign(s.targets[0], DefineMacro(s));
      return absl::OkStatus();
    case Stmt::Kind::kBreak:
      flow_ = Flow::kBreak;
      return absl::OkStatus();
    case Stmt::Kind::kContinue:
      flow_ = Flow::kContinue;
      return absl::OkStatus();
  }
  return absl::OkStatus();
}

absl::Status Interpreter::ExecSet(const Stmt& s, Value value) {
  if (s.targets.size() == 1) {
    Assign(s.targets[0], std::move(value));
    return absl::OkStatus();
  }
  const Value ns = Lookup(s.targets[0]);
  if (!ns.is_namespace()) {
    return absl::InvalidArgumentError(
        fmt::format("cannot assign attribute on non-namespace object '{}'", s.targets[0]));
  }
  ns.Set(s.targets[1], std::move(value));
  return absl::OkStatus();
}

absl::Status Interpreter::BindTargets(const Stmt& s, const Value& item) {
  if (s.targets.size() == 1) return Assign(s.targets[0], item), absl::OkStatus();
  if (!item.is_array() || item.array().size() != s.targets.size()) {
    return absl::InvalidArgumentError(fmt::format("cannot unpack a {} into {} loop variables",
                                                  item.TypeName(), s.targets.size()));
  }
  for (size_t k = 0; k < s.targets.size(); ++k) Assign(s.targets[k], item.array()[k]);
  return absl::OkStatus();
}

absl::StatusOr<Array> Interpreter::LoopItems(const Stmt& s) {
  KVTIER_ASSIGN_OR_RETURN(Value iterable, Eval(*s.expr));
  if (iterable.is_undefined()) return Array();  // Jinja's Undefined iterates as empty
  KVTIER_ASSIGN_OR_RETURN(Array items, Iterate(iterable));
  if (!s.filter) return items;
  Array kept;
  for (const Value& item : items) {  // in the loop's scope (ExecFor pushed it)
    KVTIER_RETURN_IF_ERROR(BindTargets(s, item));
    KVTIER_ASSIGN_OR_RETURN(Value keep, Eval(*s.filter));
    if (keep.Truthy()) kept.push_back(item);
  }
  return kept;
}

namespace {

// Jinja's `loop` for iteration `i` over `items`.
Value LoopObject(const Array& items, int64_t i) {
  const auto n = static_cast<int64_t>(items.size());
  Value loop = Value::FromObject({{"index", Value(i + 1)},
                                  {"index0", Value(i)},
                                  {"revindex", Value(n - i)},
                                  {"revindex0", Value(n - i - 1)},
                                  {"first", Value(i == 0)},
                                  {"last", Value(i == n - 1)},
                                  {"length", Value(n)},
                                  {"previtem", i > 0 ? items[i - 1] : Value()},
                                  {"nextitem", i + 1 < n ? items[i + 1] : Value()}});
  loop.Set("cycle", Value::FromFunction([i](CallArgs& args) -> absl::StatusOr<Value> {
             if (args.positional.empty()) {
               return absl::InvalidArgumentError("loop.cycle needs arguments");
             }
             return args.positional[i % args.positional.size()];
           }));
  return loop;
}

}  // namespace

absl::Status Interpreter::ExecFor(const Stmt& s, std::string* out) {
  scopes_.emplace_back();
  absl::StatusOr<Array> items = LoopItems(s);
  absl::Status status = items.status();
  const int64_t n = items.ok() ? static_cast<int64_t>(items->size()) : 0;
  for (int64_t i = 0; i < n && status.ok(); ++i) {
    status = BindTargets(s, (*items)[i]);
    if (!status.ok()) break;
    Assign("loop", LoopObject(*items, i));
    // Jinja: what an iteration sets is gone by the next one (namespace() attributes are not).
    scopes_.emplace_back();
    status = Exec(s.body, out);
    scopes_.pop_back();
    const bool stop = flow_ == Flow::kBreak;
    flow_ = Flow::kNormal;
    if (stop) break;
  }
  scopes_.pop_back();
  KVTIER_RETURN_IF_ERROR(status);
  return n == 0 ? Exec(s.else_body, out) : absl::OkStatus();
}

Value Interpreter::DefineMacro(const Stmt& s) {
  return Value::FromFunction([this, &s](CallArgs& args) -> absl::StatusOr<Value> {
    scopes_.emplace_back();
    absl::Status status;
    for (size_t k = 1; k < s.targets.size() && status.ok(); ++k) {
      Value v = k - 1 < args.positional.size() ? args.positional[k - 1] : Value();
      for (const auto& [key, kv] : args.keyword) {
        if (key == s.targets[k]) v = kv;
      }
      if (v.is_undefined() && s.defaults[k - 1]) {
        auto d = Eval(*s.defaults[k - 1]);
        status = d.status();
        if (d.ok()) v = *d;
      }
      Assign(s.targets[k], v);
    }
    std::string text;
    if (status.ok()) status = Exec(s.body, &text);
    scopes_.pop_back();
    KVTIER_RETURN_IF_ERROR(status);
    return Value(std::move(text));
  });
}

}  // namespace kvtier::engine::jinja
