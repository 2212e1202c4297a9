// Parses a chat template (Jinja) into statements. The subset is what real chat templates use:
// if/elif/else, for (with loop variables, tuple targets, an `if` filter and else), set (names,
// namespace attributes, blocks), macro, break/continue, generation blocks (rendered as their
// body), and expressions with Jinja's precedence: conditional, or/and/not, comparisons and `in`,
// + - ~ * / // % **, filters, `is` tests, attribute/item/slice access, calls with keyword
// arguments, list/tuple/dict literals. Anything else is an error naming its line.
#pragma once

#include <string_view>
#include <vector>

#include "common/status.h"
#include "engine/jinja_ast.h"

namespace kvtier::engine::jinja {

absl::StatusOr<std::vector<Stmt>> Parse(std::string_view source);

}  // namespace kvtier::engine::jinja
