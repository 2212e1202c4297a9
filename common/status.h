// The one error vocabulary of kvtier: absl::Status and absl::StatusOr<T>, plus the two propagation
// macros abseil does not ship publicly. Messages name the place (file, line, key, setting) and what
// was wrong; they are written for the operator who reads them.
#pragma once

#include "absl/status/status.h"
#include "absl/status/statusor.h"

// Evaluates `expr` (an absl::Status); returns it from the enclosing function if it is not OK.
#define KVTIER_RETURN_IF_ERROR(expr)                 \
  do {                                               \
    ::absl::Status kvtier_status_ = (expr);          \
    if (!kvtier_status_.ok()) return kvtier_status_; \
  } while (0)

#define KVTIER_CONCAT_INNER_(a, b) a##b
#define KVTIER_CONCAT_(a, b) KVTIER_CONCAT_INNER_(a, b)

// `lhs` = value of `rexpr` (an absl::StatusOr<T>), or returns its error from the enclosing
// function.
#define KVTIER_ASSIGN_OR_RETURN(lhs, rexpr) \
  KVTIER_ASSIGN_OR_RETURN_IMPL_(KVTIER_CONCAT_(kvtier_statusor_, __LINE__), lhs, rexpr)
#define KVTIER_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, rexpr) \
  auto tmp = (rexpr);                                  \
  if (!tmp.ok()) return std::move(tmp).status();       \
  lhs = std::move(tmp).value()
