// Runs a parsed chat template: Jinja's semantics for output, if, for (loop.index, index0, first,
// last, length, revindex, revindex0, previtem, nextitem, cycle; break/continue), set (a loop's
// assignments stay inside it; namespace() attributes reach outside), macros, and expressions
// (and/or return an operand, as in Python; an undefined variable is falsy and prints as "";
// reading an attribute of one is an error, as in Jinja's default Undefined).
#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/status.h"
#include "engine/jinja_ast.h"

namespace kvtier::engine::jinja {

// One render: not reusable, not thread-safe (make one per render; they are cheap).
class Interpreter {
 public:
  // `variables` are what the template sees besides the built-in functions.
  explicit Interpreter(const Object& variables);

  // The text `program` renders to, or the first error (its message names the template line;
  // raise_exception()'s carry kRaisedPrefix).
  absl::StatusOr<std::string> Render(const std::vector<Stmt>& program);

 private:
  enum class Flow { kNormal, kBreak, kContinue };
  using Scope = absl::flat_hash_map<std::string, Value>;

  absl::Status Exec(const std::vector<Stmt>& body, std::string* out);
  absl::Status ExecOne(const Stmt& s, std::string* out);
  absl::Status ExecFor(const Stmt& s, std::string* out);
  // The for's items that pass its `if` clause (evaluated with the loop variables bound).
  absl::StatusOr<Array> LoopItems(const Stmt& s);
  // Binds `item` to the loop variables (unpacking a list or tuple into several).
  absl::Status BindTargets(const Stmt& s, const Value& item);
  absl::Status ExecSet(const Stmt& s, Value value);
  Value DefineMacro(const Stmt& s);

  absl::StatusOr<Value> Eval(const Expr& e);
  absl::StatusOr<Value> EvalAccess(const Expr& e);
  absl::StatusOr<Value> EvalBinary(const Expr& e);
  absl::StatusOr<Value> EvalCall(const Expr& e);
  absl::StatusOr<CallArgs> EvalArgs(const Expr& e, size_t first);

  Value Lookup(const std::string& name) const;
  void Assign(const std::string& name, Value v) { scopes_.back()[name] = std::move(v); }

  std::vector<Scope> scopes_;  // [0]: globals and variables; then blocks that scope (for, macro)
  Flow flow_ = Flow::kNormal;
};

}  // namespace kvtier::engine::jinja
