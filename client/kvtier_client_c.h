/* The kvtier client's C ABI: the C++ client (kvtier_client.h) for C, Python (ctypes) and any
 * language with a C FFI. No C++ type crosses it; every struct is plain, fixed-width and versioned
 * by this header's KVTIER_C_ABI_VERSION.
 *
 * Errors: functions return 0 on success or an absl::StatusCode value (3 invalid argument, 4
 * deadline exceeded, 5 not found, 7 permission denied, 8 resource exhausted, 9 failed
 * precondition, 14 unavailable, ...); kvtier_last_error() then returns the message, valid on this
 * thread until its next call into this library.
 * Per-block outcomes are KVTIER_BLOCK_* codes, not errors.
 *
 * Arguments are checked before anything is sent or copied: a NULL client or array where one is
 * needed, a payload size of 0 or above the slot size, and the like are code 3 (invalid argument)
 * with a message naming the argument ("payload_bytes[2] is 4294967300 bytes; ..."); nothing
 * reaches the daemon and the client stays usable. Sizes are never narrowed silently.
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

/* 2: GPU transfers (kvtier_gpu_*); 3: kvtier_gpu_set_t0_reads; 4: kvtier_lookup_many;
 * 5: kvtier_connect_with (a handshake deadline, key_source), kvtier_keys_for_engine_hashes, and
 * kvtier_keys_for returning KVTIER_KEYS_ERROR on errors (it had no error return before).
 * 6: working slots (kvtier_work_take, kvtier_work_publish, kvtier_work_free, kvtier_work_item,
 * KVTIER_TIER_*, KVTIER_BLOCK_OVER_QUOTA), kvtier_mutable_slot_data, kvtier_t0_slots,
 * kvtier_gpu_t0_slot (kvtierd speaks protocol version 3). 7: KVTIER_TIER_T3; kvtier_lookup's
 * tier masks may carry 1 << KVTIER_TIER_T3 (kvtierd speaks protocol version 4). 8:
 * kvtier_connect_options.pool, the memory pool to use (kvtierd speaks protocol version 5). */
#define KVTIER_C_ABI_VERSION 8

/* Per-block outcomes (docs/protocol.md "Block codes"). */
enum {
  KVTIER_BLOCK_OK = 0,
  KVTIER_BLOCK_ALREADY_PRESENT = 1,
  KVTIER_BLOCK_RETRY_LATER = 2,
  KVTIER_BLOCK_MISSING = 3,
  KVTIER_BLOCK_LEASED = 4,
  KVTIER_BLOCK_BAD_CHECKSUM = 5,
  KVTIER_BLOCK_FAILED = 6,
  KVTIER_BLOCK_OVER_QUOTA = 7 /* kvtier_work_take: this client holds its quota of working slots */
};

/* Tiers (also the bit numbers of kvtier_lookup's tiers[]): GPU HBM, pinned host DRAM, NVMe. */
/* Tier numbers; a lookup's tier mask has bit (1 << KVTIER_TIER_*) per tier holding the block.
 * T3 is the remote tier (a store the daemons of a fleet share): gets copy its blocks into T1. */
enum { KVTIER_TIER_T0 = 0, KVTIER_TIER_T1 = 1, KVTIER_TIER_T2 = 2, KVTIER_TIER_T3 = 3 };

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

/* How a namespace's block keys are made (Namespace::key_source; part of the namespace, so the two
 * kinds never share a key). */
enum { KVTIER_KEY_SOURCE_TOKENS = 0, KVTIER_KEY_SOURCE_ENGINE_HASH = 1 };

/* Connection options beyond the namespace. Zero-initialise, then set struct_bytes =
 * sizeof(kvtier_connect_options): a later library may add fields at the end and reads only what
 * struct_bytes covers. */
typedef struct {
  uint32_t struct_bytes; /* sizeof(kvtier_connect_options) of the caller's header */
  uint32_t key_source;   /* KVTIER_KEY_SOURCE_*: tokens (kvtier_keys_for) or engine hashes */
  /* Deadline, in ms, for the connect handshake (connect, Hello, Welcome) and for each request
   * after it; a daemon that does not answer in time is code 4 (deadline exceeded). 0 = 60000. */
  int32_t timeout_ms;
  uint32_t reserved; /* 0 */
  /* Since ABI version 8: the daemon's memory pool to use (NUL-terminated); NULL or "": the only
   * one this process may use. A pool it may not use is code 7 (permission denied). */
  const char* pool;
} kvtier_connect_options;

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

/* Connects to kvtierd at socket_path declaring *ns. The whole handshake has a deadline of 60 s
 * (kvtier_connect_with sets another): a daemon that is stopped but still holds its socket (it
 * accepts, or its listen queue is full, and it never answers) is code 4 (deadline exceeded)
 * naming the socket, never a hang. */
int kvtier_connect(const char* socket_path, const kvtier_namespace* ns, const char* client_name,
                   kvtier_client** out);
/* kvtier_connect with options (NULL: the defaults, as kvtier_connect). Code 3 for a struct_bytes
 * smaller than version 5's kvtier_connect_options (16 bytes, without pool: then no pool is named),
 * an unknown key_source, a negative timeout_ms or reserved not 0. */
int kvtier_connect_with(const char* socket_path, const kvtier_namespace* ns,
                        const char* client_name, const kvtier_connect_options* options,
                        kvtier_client** out);
void kvtier_close(kvtier_client* client);
const char* kvtier_last_error(void);

/* Keys of the whole blocks of tokens[0, n_tokens), chained from the namespace root or from
 * *parent (NULL: the root). Writes min(blocks, max_keys) keys; returns the number of blocks, or
 * KVTIER_KEYS_ERROR (kvtier_last_error says why) for a NULL client, a NULL tokens with n_tokens
 * above 0, a NULL keys with max_keys above 0, or a namespace whose key_source is engine hash. */
#define KVTIER_KEYS_ERROR SIZE_MAX
size_t kvtier_keys_for(const kvtier_client* client, const uint32_t* tokens, size_t n_tokens,
                       const kvtier_key* parent, kvtier_key* keys, size_t max_keys);
/* For a namespace connected with key_source KVTIER_KEY_SOURCE_ENGINE_HASH: keys[i] for each of
 * the engine's own block hashes hashes[0, n), chained from the namespace root or *parent
 * (key[i] = XXH3_128(key[i-1] || hashes[i] as 8 little-endian bytes)). keys has room for n.
 * Code 9 (failed precondition) for a namespace of token keys; 3 for a NULL argument with n > 0. */
int kvtier_keys_for_engine_hashes(const kvtier_client* client, const uint64_t* hashes, size_t n,
                                  const kvtier_key* parent, kvtier_key* keys);

/* Longest cached prefix of keys[0, n): *hit_blocks, and tiers[i] (bit t: in tier t) for i below
 * it when tiers is not NULL (room for n). */
int kvtier_lookup(kvtier_client* client, const kvtier_key* keys, size_t n, size_t* hit_blocks,
                  uint8_t* tiers);
/* kvtier_lookup of n_sequences independent sequences in one call (a scheduler step's waiting
 * requests): the requests go out back to back, so the round trip is paid once per window of them
 * instead of once per sequence. keys holds the sequences' keys concatenated, lengths[i] of them
 * for sequence i; hit_blocks[i] gets sequence i's cached prefix. When tiers is not NULL (room for
 * the sum of lengths, laid out like keys) it gets each sequence's tiers as kvtier_lookup's: only
 * the first hit_blocks[i] of sequence i's part are written. n_sequences 0 does nothing. Code 3
 * (invalid argument, naming it) for a NULL client, a NULL lengths or hit_blocks with n_sequences
 * above 0, a NULL keys with lengths above 0, or lengths summing past SIZE_MAX / sizeof(kvtier_key);
 * after any error hit_blocks and tiers hold nothing meaningful. */
int kvtier_lookup_many(kvtier_client* client, const kvtier_key* keys, const size_t* lengths,
                       size_t n_sequences, size_t* hit_blocks, uint8_t* tiers);
/* Leases the blocks (results[i] for each key); release them with kvtier_release. */
int kvtier_get(kvtier_client* client, const kvtier_key* keys, size_t n,
               kvtier_block_result* results);
int kvtier_release(kvtier_client* client, const kvtier_key* keys, size_t n,
                   kvtier_block_result* results /* may be NULL */);
/* Copies the leading run of cached blocks into dsts[i] (dst_bytes[i] bytes of room each),
 * releasing every lease it takes; *copied = blocks copied. */
int kvtier_get_into(kvtier_client* client, const kvtier_key* keys, size_t n, void* const* dsts,
                    const size_t* dst_bytes, size_t* copied);
/* Stores payloads[i] (payload_bytes[i] bytes, 1 to kvtier_slot_bytes) under keys[i]; codes[i]
 * gets the outcome. parent: the key before keys[0] in its sequence, or NULL. A key given twice is
 * written once, from its first payload; the later occurrence gets KVTIER_BLOCK_ALREADY_PRESENT
 * (or the first's code when the first was not stored). */
int kvtier_put(kvtier_client* client, const kvtier_key* keys, size_t n, const void* const* payloads,
               const size_t* payload_bytes, const kvtier_key* parent, uint32_t* codes);
int kvtier_drop(kvtier_client* client, const kvtier_key* keys, size_t n,
                kvtier_block_result* results /* may be NULL */);
int kvtier_get_stats(kvtier_client* client, kvtier_stats* out);

/* The bytes of T1 slot `slot` (slot_bytes long), mapped in this process; NULL for a NULL client or
 * a slot T1 does not have. kvtier_mutable_slot_data is the same address, for filling a T1
 * working slot. */
const void* kvtier_slot_data(const kvtier_client* client, uint32_t slot);
void* kvtier_mutable_slot_data(kvtier_client* client, uint32_t slot);
uint32_t kvtier_slot_bytes(const kvtier_client* client); /* 0 for a NULL client */
/* Slots in kvtierd's T0 (their size is kvtier_slot_bytes'); 0 when it has no T0 or for NULL. */
uint32_t kvtier_t0_slots(const kvtier_client* client);

/* ---- working slots (docs/protocol.md "Working slots") --------------------------------------
 * For KV computed before its block key is known: take unkeyed slots of T0 or T1 leased to this
 * client (within the per-client quota kvtierd's operator sets), fill them (T1:
 * kvtier_mutable_slot_data; T0: kvtier_gpu_t0_slot, device memory), then publish each under its
 * key, or free it. A published block stays leased to this client until kvtier_release of its key.
 * tier is KVTIER_TIER_T0 (only when kvtier_t0_slots is above 0) or KVTIER_TIER_T1; otherwise
 * code 3 naming it. n is 1 to 1024 for kvtier_work_take; publish and free with n 0 do nothing.
 * Arguments are checked before anything is sent (code 3, the client stays usable). */

/* One working slot to publish. */
typedef struct {
  kvtier_key key;
  kvtier_key parent;      /* the block before it in its sequence, when has_parent is 1 */
  uint64_t checksum;      /* XXH3-64 of the slot's first payload_bytes bytes */
  uint32_t slot;          /* a working slot of this client in the call's tier */
  uint32_t payload_bytes; /* 1 to kvtier_slot_bytes */
  uint32_t has_parent;    /* 0 or 1 */
  uint32_t reserved;      /* 0 */
} kvtier_work_item;

/* Takes n working slots of tier; results[i] (room for n): code OK with slot and payload_bytes (the
 * slot's size), RETRY_LATER (the tier is full now) or OVER_QUOTA. */
int kvtier_work_take(kvtier_client* client, uint32_t tier, size_t n, kvtier_block_result* results);
/* Publishes items[0, n) (working slots of tier); codes[i] (may be NULL): OK (now the cached block
 * items[i].key, leased to this client), ALREADY_PRESENT or BAD_CHECKSUM (the slot stays this
 * client's working slot), MISSING (not a working slot of this client, or named earlier in the same
 * call), RETRY_LATER, FAILED. */
int kvtier_work_publish(kvtier_client* client, uint32_t tier, const kvtier_work_item* items,
                        size_t n, uint32_t* codes);
/* Gives working slots slots[0, n) of tier back unpublished; codes[i] (may be NULL): OK or MISSING
 * (not a working slot of this client, or named earlier in the same call). */
int kvtier_work_free(kvtier_client* client, uint32_t tier, const uint32_t* slots, size_t n,
                     uint32_t* codes);

/* ---- GPU transfers (client/gpu_client.h) -------------------------------------------------
 * Get blocks straight into an engine's paged KV cache and put them from it, on the engine's
 * stream. Ordering: the copies run after the engine's earlier work on that stream and before its
 * later work there; another stream waits on kvtier_gpu_transfer_event(). kvtier_gpu_transfer_wait
 * blocks until the copies landed, then releases a get's leases or commits a put (only then do
 * other clients see the blocks). In a CPU-only build kvtier_gpu_open fails with code 9 (failed
 * precondition). */

typedef struct kvtier_gpu kvtier_gpu;
typedef struct kvtier_gpu_transfer kvtier_gpu_transfer;

enum { KVTIER_PATH_AUTO = 0, KVTIER_PATH_DMA = 1, KVTIER_PATH_KERNEL = 2 };

/* An engine's paged KV cache (kernels/kv_layout.h): per layer the device addresses of K and V of
 * engine block 0, and byte strides shared by every layer. One (token, head) row of head_dim
 * elements is contiguous; an engine block holds block_tokens tokens. */
typedef struct {
  uint32_t num_layers;
  void* const* k_bases; /* num_layers pointers */
  void* const* v_bases; /* num_layers pointers */
  uint32_t block_tokens;
  uint32_t kv_heads;
  uint32_t head_dim;
  uint32_t elem_bytes;
  int64_t block_stride;
  int64_t token_stride;
  int64_t head_stride;
} kvtier_kv_cache;

/* GPU transfers on `device` for `client` (which must outlive it); registers T1 with the GPU.
 * path: KVTIER_PATH_AUTO (DMA for contiguous pieces of 64 KiB and up, else the kernel), _DMA or
 * _KERNEL. */
int kvtier_gpu_open(kvtier_client* client, int device, int path, kvtier_gpu** out);
void kvtier_gpu_close(kvtier_gpu* gpu);

/* Where kvtier_gpu_get reads blocks from when kvtierd keeps a T0 on this GPU (GpuClient T0Reads):
 * _WHEN_PRESENT (what kvtier_gpu_open sets) leases blocks already in T0 from there and the rest
 * from T1; _ALWAYS leases every block from T0 (kvtierd promotes it there first); _NEVER reads T1
 * only. T0 blocks are copied device-to-device. Without a T0 on this GPU every mode reads T1. */
enum { KVTIER_T0_READS_NEVER = 0, KVTIER_T0_READS_WHEN_PRESENT = 1, KVTIER_T0_READS_ALWAYS = 2 };
/* For gets from now on; code 3 (invalid argument) for a mode not above. */
int kvtier_gpu_set_t0_reads(kvtier_gpu* gpu, int mode);
/* 1 when kvtierd's T0 is mapped for this GPU client (same GPU, IPC handle opened), else 0. */
int kvtier_gpu_t0_mapped(const kvtier_gpu* gpu);
/* The device address of T0 slot `slot` in this GPU client's mapping of T0 (kvtier_slot_bytes
 * long; valid until kvtier_gpu_close): where a T0 working slot is filled or a leased T0 block read
 * in place. NULL when T0 is not mapped here, for a slot T0 does not have, or a NULL gpu. */
void* kvtier_gpu_t0_slot(const kvtier_gpu* gpu, uint32_t slot);
/* Leases keys[0, n) and enqueues copies of the leading run of hits into engine blocks
 * engine_blocks[0, hits) on `stream` (a cudaStream_t / hipStream_t; NULL = default stream). */
int kvtier_gpu_get(kvtier_gpu* gpu, const kvtier_key* keys, size_t n, const kvtier_kv_cache* cache,
                   const int32_t* engine_blocks, void* stream, kvtier_gpu_transfer** out);
/* Reserves slots for the keys not cached yet and enqueues copies of their engine blocks on
 * `stream`; the wait commits. parent: the key before keys[0], or NULL. */
int kvtier_gpu_put(kvtier_gpu* gpu, const kvtier_key* keys, size_t n, const kvtier_kv_cache* cache,
                   const int32_t* engine_blocks, void* stream, const kvtier_key* parent,
                   kvtier_gpu_transfer** out);
/* Blocks whose copies were enqueued (a get: the leading run of hits). */
size_t kvtier_gpu_transfer_blocks(const kvtier_gpu_transfer* transfer);
/* The event recorded on the engine's stream after the copies (cudaEvent_t / hipEvent_t). */
void* kvtier_gpu_transfer_event(const kvtier_gpu_transfer* transfer);
/* Waits for the copies, then releases (get) or commits (put); codes[i] (room for the n keys
 * given, may be NULL) gets each key's KVTIER_BLOCK_* outcome. */
int kvtier_gpu_transfer_wait(kvtier_gpu_transfer* transfer, uint32_t* codes);
/* Frees the transfer, waiting first if it was not waited. */
void kvtier_gpu_transfer_free(kvtier_gpu_transfer* transfer);

#ifdef __cplusplus
}
#endif

#endif /* KVTIER_CLIENT_C_H_ */
