/* The kvtier client's C ABI: the C++ client (kvtier_client.h) for C, Python (ctypes) and any
 * language with a C FFI. No C++ type crosses it; every struct is plain, fixed-width and versioned
 * by this header's KVTIER_C_ABI_VERSION.
 *
 * Errors: functions return 0 on success or an absl::StatusCode value (3 invalid argument, 5 not
 * found, 7 permission denied, 8 resource exhausted, 14 unavailable, ...); kvtier_last_error()
 * then returns the message, valid on this thread until its next call into this library.
 * Per-block outcomes are KVTIER_BLOCK_* codes, not errors.
 *
 * Thread-safety: a client may be used from several threads (requests are serialised on it).
 * Ownership: kvtier_connect's client is freed by kvtier_close, which also makes the daemon give
 * back every lease and uncommitted put of this client. */
#ifndef KVTIER_CLIENT_C_H_
#define KVTIER_CLIENT_C_H_

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define KVTIER_C_ABI_VERSION 1

/* Per-block outcomes (docs/protocol.md "Block codes"). */
enum {
  KVTIER_BLOCK_OK = 0,
  KVTIER_BLOCK_ALREADY_PRESENT = 1,
  KVTIER_BLOCK_RETRY_LATER = 2,
  KVTIER_BLOCK_MISSING = 3,
  KVTIER_BLOCK_LEASED = 4,
  KVTIER_BLOCK_BAD_CHECKSUM = 5,
  KVTIER_BLOCK_FAILED = 6
};

typedef struct kvtier_client kvtier_client;

/* What makes KV compatible (index/namespace.h). NULL strings mean the defaults: kv_layout
 * "block_major", dtype "bf16", lora_id and cache_salt empty. model_id is required. */
typedef struct {
  const char* model_id;
  const char* kv_layout;
  const char* dtype;
  uint32_t block_tokens; /* tokens per block, a power of two; 0 = 16 */
  uint32_t tp_rank;
  uint32_t tp_size; /* 0 = 1 */
  const char* lora_id;
  const char* cache_salt;
} kvtier_namespace;

typedef struct {
  uint64_t lo;
  uint64_t hi;
} kvtier_key;

typedef struct {
  uint32_t code;          /* KVTIER_BLOCK_* */
  uint32_t slot;          /* get: the leased T1 slot when code is OK */
  uint32_t payload_bytes; /* get: bytes of payload in the slot */
  uint32_t reserved;
} kvtier_block_result;

typedef struct {
  uint64_t lookups, lookup_keys, lookup_hit_blocks;
  uint64_t gets, get_blocks, promotions;
  uint64_t puts_begun, puts_committed, puts_aborted, puts_retry;
  uint64_t releases, drops;
  uint64_t t1_slots_total, t1_slots_free, leases_held, requests_invalid;
} kvtier_stats;

/* KVTIER_C_ABI_VERSION of the library loaded (to check a binding against the header it was
 * written for). */
int kvtier_abi_version(void);

int kvtier_connect(const char* socket_path, const kvtier_namespace* ns, const char* client_name,
                   kvtier_client** out);
void kvtier_close(kvtier_client* client);
const char* kvtier_last_error(void);

/* Keys of the whole blocks of tokens[0, n_tokens), chained from the namespace root or from
 * *parent (NULL: the root). Writes min(blocks, max_keys) keys; returns the number of blocks. */
size_t kvtier_keys_for(const kvtier_client* client, const uint32_t* tokens, size_t n_tokens,
                       const kvtier_key* parent, kvtier_key* keys, size_t max_keys);

/* Longest cached prefix of keys[0, n): *hit_blocks, and tiers[i] (bit t: in tier t) for i below
 * it when tiers is not NULL (room for n). */
int kvtier_lookup(kvtier_client* client, const kvtier_key* keys, size_t n, size_t* hit_blocks,
                  uint8_t* tiers);
/* Leases the blocks (results[i] for each key); release them with kvtier_release. */
int kvtier_get(kvtier_client* client, const kvtier_key* keys, size_t n,
               kvtier_block_result* results);
int kvtier_release(kvtier_client* client, const kvtier_key* keys, size_t n,
                   kvtier_block_result* results /* may be NULL */);
/* Copies the leading run of cached blocks into dsts[i] (dst_bytes[i] bytes of room each),
 * releasing every lease it takes; *copied = blocks copied. */
int kvtier_get_into(kvtier_client* client, const kvtier_key* keys, size_t n, void* const* dsts,
                    const size_t* dst_bytes, size_t* copied);
/* Stores payloads[i] (payload_bytes[i] bytes) under keys[i]; codes[i] gets the outcome.
 * parent: the key before keys[0] in its sequence, or NULL. */
int kvtier_put(kvtier_client* client, const kvtier_key* keys, size_t n, const void* const* payloads,
               const size_t* payload_bytes, const kvtier_key* parent, uint32_t* codes);
int kvtier_drop(kvtier_client* client, const kvtier_key* keys, size_t n,
                kvtier_block_result* results /* may be NULL */);
int kvtier_get_stats(kvtier_client* client, kvtier_stats* out);

/* The bytes of T1 slot `slot` (slot_bytes long), mapped in this process. */
const void* kvtier_slot_data(const kvtier_client* client, uint32_t slot);
uint32_t kvtier_slot_bytes(const kvtier_client* client);

#ifdef __cplusplus
}
#endif

#endif /* KVTIER_CLIENT_C_H_ */
