// The C ABI over client::Client. Every entry point catches nothing because nothing below throws
// (errors are absl::Status); what C sees is a status code plus a thread-local message.
#include "client/kvtier_client_c.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "client/gpu_client.h"
#include "client/kvtier_client.h"
#include "client/kvtier_client_c_internal.h"

struct kvtier_gpu_transfer {
  kvtier::client::GpuTransfer impl;
  size_t keys;
};

namespace kvtier::client::c_abi {

thread_local std::string last_error;

int Fail(const absl::Status& status) {
  last_error = std::string(status.message());
  return static_cast<int>(status.code());
}

int Check(const void* p, const char* what) {
  if (p != nullptr) return 0;
  return Fail(absl::InvalidArgumentError(std::string(what) + " is NULL"));
}

}  // namespace kvtier::client::c_abi

namespace {

using kvtier::client::c_abi::Check;
using kvtier::client::c_abi::Fail;
using kvtier::client::c_abi::last_error;

// The first NULL of several arguments, as Check reports it (one code, one name).
int CheckAll(std::initializer_list<std::pair<const void*, const char*>> args) {
  for (const auto& [p, what] : args) {
    if (int e = Check(p, what); e) return e;
  }
  return 0;
}

std::string Or(const char* s, const char* fallback) { return s != nullptr ? s : fallback; }

absl::Span<const kvtier::BlockKey> Keys(const kvtier_key* keys, size_t n) {
  static_assert(sizeof(kvtier_key) == sizeof(kvtier::BlockKey));
  return {reinterpret_cast<const kvtier::BlockKey*>(keys), n};
}

// keys[0, n) after the checks every keys argument gets: a client, and keys unless n is 0.
absl::StatusOr<absl::Span<const kvtier::BlockKey>> KeysArg(const kvtier_client* client,
                                                           const kvtier_key* keys, size_t n) {
  if (client == nullptr) return absl::InvalidArgumentError("client is NULL");
  if (n > 0 && keys == nullptr) {
    return absl::InvalidArgumentError(fmt::format("keys is NULL but n is {}", n));
  }
  if (n > SIZE_MAX / sizeof(kvtier_key)) {
    return absl::InvalidArgumentError(fmt::format("n is {}: more keys than memory holds", n));
  }
  return Keys(keys, n);
}

std::optional<kvtier::BlockKey> KeyOrNone(const kvtier_key* key) {
  if (key == nullptr) return std::nullopt;
  return kvtier::BlockKey{key->lo, key->hi};
}

// The payloads of a put as spans, each 1 to slot_bytes bytes and not NULL; InvalidArgument
// naming the first that is not (checked here, before the C++ client sees a size, so the message
// names the C argument).
absl::StatusOr<std::vector<absl::Span<const std::byte>>> PayloadsArg(const void* const* payloads,
                                                                     const size_t* payload_bytes,
                                                                     size_t n,
                                                                     uint32_t slot_bytes) {
  if (n > 0 && (payloads == nullptr || payload_bytes == nullptr)) {
    return absl::InvalidArgumentError(
        fmt::format("payloads and payload_bytes must not be NULL (n is {})", n));
  }
  std::vector<absl::Span<const std::byte>> spans(n);
  for (size_t i = 0; i < n; ++i) {
    if (payload_bytes[i] == 0 || payload_bytes[i] > slot_bytes) {
      return absl::InvalidArgumentError(
          fmt::format("payload_bytes[{}] is {} bytes; a payload is 1 to {} bytes "
                      "(kvtier_slot_bytes)",
                      i, payload_bytes[i], slot_bytes));
    }
    if (payloads[i] == nullptr) {
      return absl::InvalidArgumentError(fmt::format("payloads[{}] is NULL", i));
    }
    spans[i] = {static_cast<const std::byte*>(payloads[i]), payload_bytes[i]};
  }
  return spans;
}

kvtier::Namespace NamespaceFrom(const kvtier_namespace& ns) {
  kvtier::Namespace out;
  out.model_id = Or(ns.model_id, "");
  out.kv_layout = Or(ns.kv_layout, "block_major");
  out.dtype = Or(ns.dtype, "bf16");
  out.block_tokens = ns.block_tokens == 0 ? 16 : ns.block_tokens;
  out.tp_rank = ns.tp_rank;
  out.tp_size = ns.tp_size == 0 ? 1 : ns.tp_size;
  out.lora_id = Or(ns.lora_id, "");
  out.cache_salt = Or(ns.cache_salt, "");
  return out;
}

// Applies kvtier_connect_options (NULL: nothing to apply) to `options`.
absl::Status ApplyConnectOptions(const kvtier_connect_options* o,
                                 kvtier::client::ClientOptions* options) {
  if (o == nullptr) return absl::OkStatus();
  // Version 5's struct ended before `pool`; a caller of that header names no pool.
  constexpr size_t kV5Bytes = offsetof(kvtier_connect_options, pool);
  if (o->struct_bytes < kV5Bytes) {
    return absl::InvalidArgumentError(fmt::format(
        "options->struct_bytes is {}; set it to sizeof(kvtier_connect_options), {} (at least {})",
        o->struct_bytes, sizeof(kvtier_connect_options), kV5Bytes));
  }
  if (o->struct_bytes >= sizeof(kvtier_connect_options) && o->pool != nullptr) {
    options->pool = o->pool;
  }
  if (o->key_source > KVTIER_KEY_SOURCE_ENGINE_HASH) {
    return absl::InvalidArgumentError(
        fmt::format("options->key_source is {}; it is KVTIER_KEY_SOURCE_TOKENS or _ENGINE_HASH",
                    o->key_source));
  }
  if (o->timeout_ms < 0 || o->reserved != 0) {
    return absl::InvalidArgumentError(
        fmt::format("options->timeout_ms is {} (0 or above) and reserved {} (must be 0)",
                    o->timeout_ms, o->reserved));
  }
  static_assert(KVTIER_KEY_SOURCE_ENGINE_HASH == static_cast<int>(kvtier::KeySource::kEngineHash));
  options->ns.key_source = static_cast<kvtier::KeySource>(o->key_source);
  if (o->timeout_ms != 0) options->timeout_ms = o->timeout_ms;
  return absl::OkStatus();
}

// The concatenated keys cut into lengths[i] per sequence; InvalidArgument naming the argument
// when the lengths add up past what an array of keys can hold, or keys is NULL with any to read.
absl::StatusOr<std::vector<absl::Span<const kvtier::BlockKey>>> SequencesOf(const kvtier_key* keys,
                                                                            const size_t* lengths,
                                                                            size_t n_sequences) {
  constexpr size_t kMaxKeys = SIZE_MAX / sizeof(kvtier_key);
  std::vector<absl::Span<const kvtier::BlockKey>> out(n_sequences);
  size_t total = 0;
  for (size_t i = 0; i < n_sequences; ++i) {
    if (lengths[i] > kMaxKeys - total) {
      return absl::InvalidArgumentError(
          fmt::format("lengths: the sum of lengths[0..{}] overflows an array of keys", i));
    }
    total += lengths[i];
  }
  if (total > 0 && keys == nullptr) {
    return absl::InvalidArgumentError(fmt::format("keys is NULL but lengths add up to {}", total));
  }
  size_t offset = 0;
  for (size_t i = 0; i < n_sequences; ++i) {
    if (lengths[i] != 0) out[i] = Keys(keys + offset, lengths[i]);
    offset += lengths[i];
  }
  return out;
}

void CopyResults(const std::vector<kvtier::protocol::BlockResult>& in, kvtier_block_result* out) {
  static_assert(sizeof(kvtier_block_result) == sizeof(kvtier::protocol::BlockResult));
  if (out != nullptr && !in.empty()) {
    std::memcpy(out, in.data(), in.size() * sizeof(kvtier_block_result));
  }
}

// The C description of an engine cache, as kernels/kv_layout.h's.
absl::StatusOr<kvtier::PagedKvCache> CacheFrom(const kvtier_kv_cache* c) {
  if (c == nullptr || c->k_bases == nullptr || c->v_bases == nullptr) {
    return absl::InvalidArgumentError("cache, cache->k_bases and cache->v_bases must not be NULL");
  }
  kvtier::PagedKvCache out;
  for (uint32_t l = 0; l < c->num_layers; ++l) out.layers.push_back({c->k_bases[l], c->v_bases[l]});
  out.block_tokens = c->block_tokens;
  out.kv_heads = c->kv_heads;
  out.head_dim = c->head_dim;
  out.elem_bytes = c->elem_bytes;
  out.block_stride = c->block_stride;
  out.token_stride = c->token_stride;
  out.head_stride = c->head_stride;
  return out;
}

}  // namespace

extern "C" {

const char* kvtier_last_error(void) { return last_error.c_str(); }

int kvtier_abi_version(void) { return KVTIER_C_ABI_VERSION; }

int kvtier_connect(const char* socket_path, const kvtier_namespace* ns, const char* client_name,
                   kvtier_client** out) {
  return kvtier_connect_with(socket_path, ns, client_name, nullptr, out);
}

int kvtier_connect_with(const char* socket_path, const kvtier_namespace* ns,
                        const char* client_name, const kvtier_connect_options* connect_options,
                        kvtier_client** out) {
  if (int e = CheckAll({{socket_path, "socket_path"}, {ns, "ns"}, {out, "out"}}); e) return e;
  kvtier::client::ClientOptions options;
  options.socket_path = socket_path;
  options.client_name = Or(client_name, "c-client");
  options.ns = NamespaceFrom(*ns);
  if (absl::Status s = ApplyConnectOptions(connect_options, &options); !s.ok()) return Fail(s);
  auto client = kvtier::client::Client::Connect(options);
  if (!client.ok()) return Fail(client.status());
  *out = new kvtier_client{std::move(*client)};
  return 0;
}

void kvtier_close(kvtier_client* client) { delete client; }

size_t kvtier_keys_for(const kvtier_client* client, const uint32_t* tokens, size_t n_tokens,
                       const kvtier_key* parent, kvtier_key* keys, size_t max_keys) {
  const auto fail = [](const absl::Status& status) {
    Fail(status);
    return size_t{KVTIER_KEYS_ERROR};
  };
  if (client == nullptr) return fail(absl::InvalidArgumentError("client is NULL"));
  if (tokens == nullptr && n_tokens > 0) {
    return fail(
        absl::InvalidArgumentError(fmt::format("tokens is NULL but n_tokens is {}", n_tokens)));
  }
  if (keys == nullptr && max_keys > 0) {
    return fail(
        absl::InvalidArgumentError(fmt::format("keys is NULL but max_keys is {}", max_keys)));
  }
  auto out = client->impl->KeysFor({tokens, n_tokens}, KeyOrNone(parent));
  if (!out.ok()) return fail(out.status());
  const size_t n = std::min(out->size(), max_keys);
  if (n != 0) std::memcpy(keys, out->data(), n * sizeof(kvtier_key));
  return out->size();
}

int kvtier_keys_for_engine_hashes(const kvtier_client* client, const uint64_t* hashes, size_t n,
                                  const kvtier_key* parent, kvtier_key* keys) {
  if (int e = Check(client, "client"); e) return e;
  if (n > 0 && (hashes == nullptr || keys == nullptr)) {
    return Fail(
        absl::InvalidArgumentError(fmt::format("hashes and keys must not be NULL (n is {})", n)));
  }
  auto out = client->impl->KeysForEngineHashes({hashes, n}, KeyOrNone(parent));
  if (!out.ok()) return Fail(out.status());
  if (n != 0) std::memcpy(keys, out->data(), n * sizeof(kvtier_key));
  return 0;
}

int kvtier_lookup(kvtier_client* client, const kvtier_key* keys, size_t n, size_t* hit_blocks,
                  uint8_t* tiers) {
  if (int e = Check(hit_blocks, "hit_blocks"); e) return e;
  auto k = KeysArg(client, keys, n);
  if (!k.ok()) return Fail(k.status());
  auto result = client->impl->Lookup(*k);
  if (!result.ok()) return Fail(result.status());
  *hit_blocks = result->hit_blocks;
  if (tiers != nullptr && !result->tiers.empty()) {
    std::memcpy(tiers, result->tiers.data(), result->tiers.size());
  }
  return 0;
}

int kvtier_lookup_many(kvtier_client* client, const kvtier_key* keys, const size_t* lengths,
                       size_t n_sequences, size_t* hit_blocks, uint8_t* tiers) {
  if (int e = Check(client, "client"); e) return e;
  if (n_sequences == 0) return 0;
  if (int e = CheckAll({{lengths, "lengths"}, {hit_blocks, "hit_blocks"}}); e) return e;
  auto sequences = SequencesOf(keys, lengths, n_sequences);
  if (!sequences.ok()) return Fail(sequences.status());
  auto results = client->impl->LookupMany(*sequences);
  if (!results.ok()) return Fail(results.status());
  size_t offset = 0;
  for (size_t i = 0; i < n_sequences; ++i) {
    const kvtier::client::LookupResult& r = (*results)[i];
    hit_blocks[i] = r.hit_blocks;
    if (tiers != nullptr && !r.tiers.empty()) {
      std::memcpy(tiers + offset, r.tiers.data(), r.tiers.size());
    }
    offset += lengths[i];
  }
  return 0;
}

int kvtier_get(kvtier_client* client, const kvtier_key* keys, size_t n,
               kvtier_block_result* results) {
  if (int e = Check(results, "results"); e) return e;
  auto k = KeysArg(client, keys, n);
  if (!k.ok()) return Fail(k.status());
  auto got = client->impl->Get(*k);
  if (!got.ok()) return Fail(got.status());
  CopyResults(*got, results);
  return 0;
}

int kvtier_release(kvtier_client* client, const kvtier_key* keys, size_t n,
                   kvtier_block_result* results) {
  auto k = KeysArg(client, keys, n);
  if (!k.ok()) return Fail(k.status());
  auto done = client->impl->Release(*k);
  if (!done.ok()) return Fail(done.status());
  CopyResults(*done, results);
  return 0;
}

int kvtier_get_into(kvtier_client* client, const kvtier_key* keys, size_t n, void* const* dsts,
                    const size_t* dst_bytes, size_t* copied) {
  if (int e = CheckAll({{copied, "copied"}, {dsts, "dsts"}, {dst_bytes, "dst_bytes"}}); e) {
    return e;
  }
  auto k = KeysArg(client, keys, n);
  if (!k.ok()) return Fail(k.status());
  std::vector<absl::Span<std::byte>> spans(n);
  for (size_t i = 0; i < n; ++i) {
    if (dsts[i] == nullptr && dst_bytes[i] > 0) {
      return Fail(absl::InvalidArgumentError(
          fmt::format("dsts[{}] is NULL but dst_bytes[{}] is {}", i, i, dst_bytes[i])));
    }
    spans[i] = {static_cast<std::byte*>(dsts[i]), dst_bytes[i]};
  }
  auto done = client->impl->GetInto(*k, spans);
  if (!done.ok()) return Fail(done.status());
  *copied = *done;
  return 0;
}

int kvtier_put(kvtier_client* client, const kvtier_key* keys, size_t n, const void* const* payloads,
               const size_t* payload_bytes, const kvtier_key* parent, uint32_t* codes) {
  auto k = KeysArg(client, keys, n);
  if (!k.ok()) return Fail(k.status());
  auto spans = PayloadsArg(payloads, payload_bytes, n, client->impl->slot_bytes());
  if (!spans.ok()) return Fail(spans.status());
  auto done = client->impl->Put(*k, *spans, KeyOrNone(parent));
  if (!done.ok()) return Fail(done.status());
  for (size_t i = 0; codes != nullptr && i < n; ++i) codes[i] = static_cast<uint32_t>((*done)[i]);
  return 0;
}

int kvtier_drop(kvtier_client* client, const kvtier_key* keys, size_t n,
                kvtier_block_result* results) {
  auto k = KeysArg(client, keys, n);
  if (!k.ok()) return Fail(k.status());
  auto done = client->impl->Drop(*k);
  if (!done.ok()) return Fail(done.status());
  CopyResults(*done, results);
  return 0;
}

int kvtier_get_stats(kvtier_client* client, kvtier_stats* out) {
  if (int e = CheckAll({{client, "client"}, {out, "out"}}); e) return e;
  auto stats = client->impl->Stats();
  if (!stats.ok()) return Fail(stats.status());
  static_assert(sizeof(kvtier_stats) == sizeof(kvtier::protocol::StatsWire));
  std::memcpy(out, &*stats, sizeof(*out));
  return 0;
}

const void* kvtier_slot_data(const kvtier_client* client, uint32_t slot) {
  return client != nullptr ? client->impl->SlotData(slot) : nullptr;
}

uint32_t kvtier_slot_bytes(const kvtier_client* client) {
  return client != nullptr ? client->impl->slot_bytes() : 0;
}

// ---- GPU transfers ----

int kvtier_gpu_open(kvtier_client* client, int device, int path, kvtier_gpu** out) {
  if (int e = CheckAll({{client, "client"}, {out, "out"}}); e) return e;
  kvtier::client::GpuClientOptions options;
  options.device = device;
  if (path == KVTIER_PATH_DMA) options.path = kvtier::KvCopyPath::kDma;
  if (path == KVTIER_PATH_KERNEL) options.path = kvtier::KvCopyPath::kKernel;
  if (path < KVTIER_PATH_AUTO || path > KVTIER_PATH_KERNEL) {
    return Fail(absl::InvalidArgumentError("path must be KVTIER_PATH_AUTO, _DMA or _KERNEL"));
  }
  auto gpu = kvtier::client::GpuClient::Create(client->impl.get(), options);
  if (!gpu.ok()) return Fail(gpu.status());
  *out = new kvtier_gpu{std::move(*gpu)};
  return 0;
}

void kvtier_gpu_close(kvtier_gpu* gpu) { delete gpu; }

int kvtier_gpu_set_t0_reads(kvtier_gpu* gpu, int mode) {
  if (int e = Check(gpu, "gpu"); e) return e;
  if (mode < KVTIER_T0_READS_NEVER || mode > KVTIER_T0_READS_ALWAYS) {
    return Fail(
        absl::InvalidArgumentError("mode must be KVTIER_T0_READS_NEVER, _WHEN_PRESENT or _ALWAYS"));
  }
  static_assert(KVTIER_T0_READS_WHEN_PRESENT ==
                static_cast<int>(kvtier::client::T0Reads::kWhenPresent));
  static_assert(KVTIER_T0_READS_ALWAYS == static_cast<int>(kvtier::client::T0Reads::kAlways));
  gpu->impl->set_t0_reads(static_cast<kvtier::client::T0Reads>(mode));
  return 0;
}

int kvtier_gpu_t0_mapped(const kvtier_gpu* gpu) {
  return gpu != nullptr && gpu->impl->t0_mapped() ? 1 : 0;
}

int kvtier_gpu_get(kvtier_gpu* gpu, const kvtier_key* keys, size_t n, const kvtier_kv_cache* cache,
                   const int32_t* engine_blocks, void* stream, kvtier_gpu_transfer** out) {
  if (int e = CheckAll({{gpu, "gpu"}, {out, "out"}}); e) return e;
  if (n > 0 && (keys == nullptr || engine_blocks == nullptr)) {
    return Fail(absl::InvalidArgumentError("keys and engine_blocks must not be NULL"));
  }
  auto layout = CacheFrom(cache);
  if (!layout.ok()) return Fail(layout.status());
  auto t = gpu->impl->GetIntoCache(Keys(keys, n), *layout, {engine_blocks, n}, stream);
  if (!t.ok()) return Fail(t.status());
  *out = new kvtier_gpu_transfer{std::move(*t), n};
  return 0;
}

int kvtier_gpu_put(kvtier_gpu* gpu, const kvtier_key* keys, size_t n, const kvtier_kv_cache* cache,
                   const int32_t* engine_blocks, void* stream, const kvtier_key* parent,
                   kvtier_gpu_transfer** out) {
  if (int e = CheckAll({{gpu, "gpu"}, {out, "out"}}); e) return e;
  if (n > 0 && (keys == nullptr || engine_blocks == nullptr)) {
    return Fail(absl::InvalidArgumentError("keys and engine_blocks must not be NULL"));
  }
  auto layout = CacheFrom(cache);
  if (!layout.ok()) return Fail(layout.status());
  auto t = gpu->impl->PutFromCache(Keys(keys, n), *layout, {engine_blocks, n}, stream,
                                   KeyOrNone(parent));
  if (!t.ok()) return Fail(t.status());
  *out = new kvtier_gpu_transfer{std::move(*t), n};
  return 0;
}

size_t kvtier_gpu_transfer_blocks(const kvtier_gpu_transfer* transfer) {
  return transfer->impl.copied_blocks();
}

void* kvtier_gpu_transfer_event(const kvtier_gpu_transfer* transfer) {
  return transfer->impl.event();
}

int kvtier_gpu_transfer_wait(kvtier_gpu_transfer* transfer, uint32_t* codes) {
  if (int e = Check(transfer, "transfer"); e) return e;
  auto result = transfer->impl.Wait();
  if (!result.ok()) return Fail(result.status());
  if (codes != nullptr) {
    for (size_t i = 0; i < result->size() && i < transfer->keys; ++i) {
      codes[i] = static_cast<uint32_t>((*result)[i]);
    }
  }
  return 0;
}

void kvtier_gpu_transfer_free(kvtier_gpu_transfer* transfer) { delete transfer; }

}  // extern "C"
