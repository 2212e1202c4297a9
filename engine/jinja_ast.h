// The parsed form of a chat template: statements (text, output, if, for, set, macro, ...) and the
// expressions inside them. Built by engine/jinja_parser.h, run by engine/jinja_interpreter.h.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "engine/jinja_value.h"

namespace kvtier::engine::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kAttr,     // children[0].name
    kItem,     // children[0][children[1]]
    kSlice,    // children[0][children[1]:children[2]:children[3]] (null: omitted)
    kCall,     // children[0](children[1..], kwargs)
    kFilter,   // children[0] | name(children[1..], kwargs)
    kTest,     // children[0] is [not] name(children[1..])
    kUnary,    // name children[0]      (name: "not", "-", "+")
    kBinary,   // children[0] name children[1]  (name: "or", "and", "==", "in", "not in", "+", ...)
    kCond,     // children[0] if children[1] else children[2] (children[2] null: undefined)
    kList,     // [children...] (tuples too)
    kDict,     // {children[0]: children[1], ...}
  };
  Kind kind;
  int line = 0;
  Value literal;
  std::string name;
  std::vector<ExprPtr> children;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
  bool negated = false;  // kTest: "is not"; kList: a tuple
};

struct Stmt {
  enum class Kind { kText, kOutput, kIf, kFor, kSet, kSetBlock, kMacro, kBreak, kContinue };
  Kind kind;
  int line = 0;
  std::string text;                  // kText
  ExprPtr expr;                      // kOutput; kSet's value; kFor's iterable
  ExprPtr filter;                    // kFor's "if" clause
  std::vector<std::string> targets;  // kFor's loop variables; kSet/kSetBlock: {name} or
                                     // {name, attribute}; kMacro: {name, parameters...}
  std::vector<ExprPtr> defaults;     // kMacro: parameter defaults (null: none), one per parameter
  std::vector<std::pair<ExprPtr, std::vector<Stmt>>> branches;  // kIf: (condition, body)...
  std::vector<Stmt> body;                                       // kFor, kSetBlock, kMacro
  std::vector<Stmt> else_body;                                  // kIf, kFor
};

}  // namespace kvtier::engine::jinja
