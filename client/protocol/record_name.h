// Internal to the record codec: the name of one record in error messages, e.g. "request 7
// (lookup)". Formatted only when a message is built: decoding and checking a record that is fine
// (every request and completion on the hot path) costs no string.
#pragma once

#include <fmt/format.h>

#include <cstdint>

#include "client/protocol/record_codec.h"

namespace kvtier::protocol {

struct RecordName {
  const char* kind;  // "request" or "completion"; a string literal
  uint64_t id;
  uint8_t op;
};

}  // namespace kvtier::protocol

template <>
struct fmt::formatter<kvtier::protocol::RecordName> : fmt::formatter<fmt::string_view> {
  template <typename Context>
  auto format(const kvtier::protocol::RecordName& name, Context& ctx) const {
    return fmt::format_to(ctx.out(), "{} {} ({})", name.kind, name.id,
                          kvtier::protocol::OpName(name.op));
  }
};
