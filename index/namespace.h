// Namespaces: what makes KV incompatible or private (DESIGN.md "Words"). Two namespaces that differ
// in any field have unrelated roots, so their blocks can never share keys or probe each other.
#pragma once

#include <cstdint>
#include <string>

#include "common/status.h"
#include "index/block_key.h"

namespace kvtier {

enum class KeySource : uint8_t {
  kTokens = 0,      // keys chained from token ids (ChainTokenBlock)
  kEngineHash = 1,  // keys chained from the engine's own block hashes (ChainEngineHash)
};

struct Namespace {
  std::string model_id;  // e.g. "meta-llama/Llama-3.1-8B-Instruct@<revision>"; required
  std::string kv_layout = "block_major";  // payload layout name
  std::string dtype = "bf16";             // KV element type
  uint32_t block_tokens = 16;             // power of two
  uint32_t tp_rank = 0;                   // tensor-parallel rank, < tp_size
  uint32_t tp_size = 1;
  std::string lora_id;     // empty: base model
  std::string cache_salt;  // empty: none; set per tenant to make caches private
  KeySource key_source = KeySource::kTokens;

  // OK, or InvalidArgument naming the first bad field.
  absl::Status Validate() const;

  // The canonical description hashed into the root: a versioned header, then each field in a fixed
  // order as `name=<byte length>:<bytes>\n`. Length prefixes make it unambiguous for any field
  // value.
  std::string Canonical() const;
};

// key[-1] = XXH3_128(ns.Canonical()). Call Validate() first; this does not.
BlockKey NamespaceRoot(const Namespace& ns);

}  // namespace kvtier
