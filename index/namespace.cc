#include "index/namespace.h"

#include "absl/strings/str_cat.h"

#define XXH_INLINE_ALL
#include <xxhash.h>

namespace kvtier {
namespace {

// Bump when the canonical form or the key chaining changes: every key changes with it.
constexpr char kCanonicalHeader[] = "kvtier.namespace.v1\n";

void AppendField(std::string* out, std::string_view name, std::string_view value) {
  out->append(name).append("=").append(std::to_string(value.size())).append(":");
  out->append(value).append("\n");
}

}  // namespace

absl::Status Namespace::Validate() const {
  if (model_id.empty()) return absl::InvalidArgumentError("namespace.model_id: must not be empty");
  if (kv_layout.empty())
    return absl::InvalidArgumentError("namespace.kv_layout: must not be empty");
  if (dtype.empty()) return absl::InvalidArgumentError("namespace.dtype: must not be empty");
  if (block_tokens == 0 || (block_tokens & (block_tokens - 1)) != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace.block_tokens: ", block_tokens, " is not a power of two"));
  }
  if (tp_size == 0 || tp_rank >= tp_size) {
    return absl::InvalidArgumentError(
        absl::StrCat("namespace.tp_rank: ", tp_rank, " is not below tp_size ", tp_size));
  }
  return absl::OkStatus();
}

std::string Namespace::Canonical() const {
  std::string out = kCanonicalHeader;
  AppendField(&out, "model_id", model_id);
  AppendField(&out, "kv_layout", kv_layout);
  AppendField(&out, "dtype", dtype);
  AppendField(&out, "block_tokens", absl::StrCat(block_tokens));
  AppendField(&out, "tp_rank", absl::StrCat(tp_rank));
  AppendField(&out, "tp_size", absl::StrCat(tp_size));
  AppendField(&out, "lora_id", lora_id);
  AppendField(&out, "cache_salt", cache_salt);
  AppendField(&out, "key_source", key_source == KeySource::kTokens ? "tokens" : "engine_hash");
  return out;
}

BlockKey NamespaceRoot(const Namespace& ns) {
  std::string c = ns.Canonical();
  XXH128_hash_t h = XXH3_128bits(c.data(), c.size());
  return BlockKey{h.low64, h.high64};
}

}  // namespace kvtier
