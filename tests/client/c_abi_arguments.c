/* The C ABI's argument checks, connect options and key sources against a real kvtierd (started by
 * with_kvtierd.sh, which passes its socket as argv[1]) (issue 11): sizes out of range are refused
 * before anything is copied or sent, naming the argument, and the client stays usable; a key given
 * twice in one put is written once; kvtier_connect_with's deadline holds against a socket that
 * never answers; a namespace of engine hashes takes engine hashes only; the working-slot calls'
 * arguments are checked before anything is sent; the connect options' pool (ABI 8) reaches the
 * daemon. */
#define _DEFAULT_SOURCE /* mmap's MAP_ANONYMOUS and MAP_NORESERVE under -std=c11 */
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "client/kvtier_client_c.h"
#include "tests/client/c_abi_expect.h"

enum { kBlockTokens = 16, kPayloadBytes = 1000 };

static kvtier_connect_options Options(uint32_t key_source, int32_t timeout_ms) {
  kvtier_connect_options o;
  memset(&o, 0, sizeof(o));
  o.struct_bytes = sizeof(o);
  o.key_source = key_source;
  o.timeout_ms = timeout_ms;
  return o;
}

static int Mentions(const char* what) { return strstr(kvtier_last_error(), what) != NULL; }

/* 4 GiB + 16 bytes that nobody may touch: the put must be refused before a byte is copied (it
 * was cut to 16 bytes for put_begin, then copied whole over other blocks in T1). */
static void HugeAndEmptyPayloads(kvtier_client* c, const kvtier_key* keys) {
  const size_t huge_bytes = ((size_t)4 << 30) + 16;
  void* huge =
      mmap(NULL, huge_bytes, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  EXPECT(huge != MAP_FAILED);
  static unsigned char fine[2][kPayloadBytes];
  memset(fine, 0x5c, sizeof(fine));
  const void* srcs[2] = {huge, fine[1]};
  size_t sizes[2] = {huge_bytes, kPayloadBytes};
  uint32_t codes[2];
  EXPECT(kvtier_put(c, keys, 2, srcs, sizes, NULL, codes) == 3);
  EXPECT(Mentions("payload_bytes[0] is 4294967312 bytes"));
  munmap(huge, huge_bytes);

  srcs[0] = fine[0];
  sizes[0] = kPayloadBytes;
  sizes[1] = 0;
  EXPECT(kvtier_put(c, keys, 2, srcs, sizes, NULL, codes) == 3 && Mentions("payload_bytes[1]"));
  sizes[1] = (size_t)kvtier_slot_bytes(c) + 1;
  EXPECT(kvtier_put(c, keys, 2, srcs, sizes, NULL, codes) == 3 && Mentions("payload_bytes[1]"));
  srcs[1] = NULL;
  sizes[1] = kPayloadBytes;
  EXPECT(kvtier_put(c, keys, 2, srcs, sizes, NULL, codes) == 3 && Mentions("payloads[1]"));
  EXPECT(kvtier_put(c, NULL, 2, srcs, sizes, NULL, codes) == 3 && Mentions("keys is NULL"));
  EXPECT(kvtier_keys_for(NULL, NULL, 0, NULL, NULL, 0) == KVTIER_KEYS_ERROR);

  /* The same client goes on: a key given twice is written once. */
  srcs[1] = fine[1];
  const kvtier_key twice[2] = {keys[0], keys[0]};
  EXPECT(kvtier_put(c, twice, 2, srcs, sizes, NULL, codes) == 0);
  EXPECT(codes[0] == KVTIER_BLOCK_OK && codes[1] == KVTIER_BLOCK_ALREADY_PRESENT);
  kvtier_stats stats;
  EXPECT(kvtier_get_stats(c, &stats) == 0 && stats.requests_invalid == 0);
}

/* The working-slot calls' arguments (ABI 6) are checked before anything is sent; the default
 * config has no T0, so T0 is refused too. Nothing here reaches the daemon. */
static void WorkingSlotArguments(kvtier_client* c) {
  EXPECT(kvtier_abi_version() == KVTIER_C_ABI_VERSION && KVTIER_C_ABI_VERSION == 8);
  kvtier_block_result results[1];
  EXPECT(kvtier_work_take(c, KVTIER_TIER_T2, 1, results) == 3 && Mentions("tier is 2"));
  EXPECT(kvtier_t0_slots(c) == 0);
  EXPECT(kvtier_work_take(c, KVTIER_TIER_T0, 1, results) == 3 && Mentions("has no T0"));
  EXPECT(kvtier_work_take(c, KVTIER_TIER_T1, 0, results) == 3 && Mentions("n is 0"));
  EXPECT(kvtier_work_take(c, KVTIER_TIER_T1, 1025, results) == 3 && Mentions("n is 1025"));
  EXPECT(kvtier_work_take(c, KVTIER_TIER_T1, 1, NULL) == 3 && Mentions("results is NULL"));
  EXPECT(kvtier_work_take(NULL, KVTIER_TIER_T1, 1, results) == 3 && Mentions("client is NULL"));

  kvtier_work_item item;
  memset(&item, 0, sizeof(item));
  item.key.lo = 1;
  item.payload_bytes = 10;
  uint32_t codes[2];
  EXPECT(kvtier_work_publish(c, KVTIER_TIER_T1, NULL, 1, codes) == 3 && Mentions("items is NULL"));
  item.has_parent = 2;
  EXPECT(kvtier_work_publish(c, KVTIER_TIER_T1, &item, 1, codes) == 3 &&
         Mentions("has_parent is 2"));
  item.has_parent = 0;
  item.reserved = 1;
  EXPECT(kvtier_work_publish(c, KVTIER_TIER_T1, &item, 1, codes) == 3 && Mentions("reserved 1"));
  item.reserved = 0;
  item.payload_bytes = kvtier_slot_bytes(c) + 1;
  EXPECT(kvtier_work_publish(c, KVTIER_TIER_T1, &item, 1, codes) == 3 &&
         Mentions("items[0].payload_bytes"));
  item.payload_bytes = 10;
  EXPECT(kvtier_work_publish(c, KVTIER_TIER_T0, &item, 1, codes) == 3 && Mentions("has no T0"));
  EXPECT(kvtier_work_publish(c, KVTIER_TIER_T1, NULL, 0, codes) == 0); /* nothing to do */
  EXPECT(kvtier_work_free(c, KVTIER_TIER_T1, NULL, 2, codes) == 3 && Mentions("slots is NULL"));
  EXPECT(kvtier_work_free(c, 5, codes, 1, codes) == 3 && Mentions("tier is 5"));
  EXPECT(kvtier_work_free(c, KVTIER_TIER_T1, NULL, 0, NULL) == 0);

  EXPECT(kvtier_mutable_slot_data(c, 0) == kvtier_slot_data(c, 0) && kvtier_slot_data(c, 0));
  EXPECT(kvtier_mutable_slot_data(NULL, 0) == NULL && kvtier_gpu_t0_slot(NULL, 0) == NULL);
  kvtier_stats stats;
  EXPECT(kvtier_get_stats(c, &stats) == 0 && stats.requests_invalid == 0);
}

/* A listening socket next to the daemon's that never accepts or answers. */
static int SilentSocket(const char* daemon_socket, char* path, size_t room) {
  snprintf(path, room, "%s.silent", daemon_socket);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  struct sockaddr_un addr;
  memset(&addr, 0, sizeof(addr));
  addr.sun_family = AF_UNIX;
  EXPECT(strlen(path) < sizeof(addr.sun_path));
  memcpy(addr.sun_path, path, strlen(path) < sizeof(addr.sun_path) ? strlen(path) : 0);
  EXPECT(bind(fd, (struct sockaddr*)&addr, sizeof(addr)) == 0 && listen(fd, 16) == 0);
  return fd;
}

static void ConnectOptions(const char* socket_path, const kvtier_namespace* ns) {
  kvtier_client* c = NULL;
  kvtier_connect_options o = Options(KVTIER_KEY_SOURCE_TOKENS, 200);
  o.struct_bytes = 4;
  EXPECT(kvtier_connect_with(socket_path, ns, "c-args", &o, &c) == 3 && Mentions("struct_bytes"));
  o = Options(7, 200);
  EXPECT(kvtier_connect_with(socket_path, ns, "c-args", &o, &c) == 3 && Mentions("key_source"));
  /* ABI 8's pool: the daemon's one pool is "default"; another is refused by the daemon (code 7,
   * permission denied, naming it). A caller of version 5's struct (no pool) names none. */
  o = Options(KVTIER_KEY_SOURCE_TOKENS, 0);
  o.pool = "default";
  EXPECT(kvtier_connect_with(socket_path, ns, "c-args", &o, &c) == 0 && c != NULL);
  kvtier_close(c);
  c = NULL;
  o.pool = "tenant-b";
  EXPECT(kvtier_connect_with(socket_path, ns, "c-args", &o, &c) == 7 &&
         Mentions("memory pool 'tenant-b'"));
  o.struct_bytes = (uint32_t)offsetof(kvtier_connect_options, pool);
  EXPECT(kvtier_connect_with(socket_path, ns, "c-args", &o, &c) == 0 && c != NULL);
  kvtier_close(c);
  c = NULL;

  char silent[256];
  const int fd = SilentSocket(socket_path, silent, sizeof(silent));
  o = Options(KVTIER_KEY_SOURCE_TOKENS, 200);
  EXPECT(kvtier_connect_with(silent, ns, "c-args", &o, &c) == 4); /* deadline exceeded */
  EXPECT(Mentions(silent) && Mentions("timeout_ms = 200"));
  close(fd);
  unlink(silent);
}

static void EngineHashes(const char* socket_path, kvtier_namespace ns, kvtier_client* tokens) {
  kvtier_client* c = NULL;
  kvtier_connect_options o = Options(KVTIER_KEY_SOURCE_ENGINE_HASH, 0);
  if (kvtier_connect_with(socket_path, &ns, "c-engine", &o, &c) != 0) {
    EXPECT(!"kvtier_connect_with (engine hash)");
    return;
  }
  uint32_t ids[kBlockTokens] = {0};
  kvtier_key keys[2];
  EXPECT(kvtier_keys_for(c, ids, kBlockTokens, NULL, keys, 2) == KVTIER_KEYS_ERROR);
  EXPECT(Mentions("engine_hash"));
  const uint64_t hashes[2] = {0xabcdef, 0x123456};
  EXPECT(kvtier_keys_for_engine_hashes(tokens, hashes, 2, NULL, keys) == 9);
  EXPECT(kvtier_keys_for_engine_hashes(c, hashes, 2, NULL, keys) == 0);
  kvtier_key second;
  EXPECT(kvtier_keys_for_engine_hashes(c, hashes + 1, 1, &keys[0], &second) == 0);
  EXPECT(second.lo == keys[1].lo && second.hi == keys[1].hi);

  static unsigned char payload[kPayloadBytes];
  const void* srcs[2] = {payload, payload};
  const size_t sizes[2] = {kPayloadBytes, kPayloadBytes};
  uint32_t codes[2];
  EXPECT(kvtier_put(c, keys, 2, srcs, sizes, NULL, codes) == 0 && codes[1] == KVTIER_BLOCK_OK);
  size_t hit = 0;
  EXPECT(kvtier_lookup(c, keys, 2, &hit, NULL) == 0 && hit == 2);
  kvtier_close(c);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]);
    return 2;
  }
  kvtier_namespace ns;
  memset(&ns, 0, sizeof(ns));
  ns.model_id = "c-args-model";
  kvtier_client* c = NULL;
  if (kvtier_connect(argv[1], &ns, "c-args", &c) != 0) {
    fprintf(stderr, "kvtier_connect(%s): %s\n", argv[1], kvtier_last_error());
    return 1;
  }
  uint32_t tokens[2 * kBlockTokens];
  for (size_t i = 0; i < 2 * kBlockTokens; ++i) tokens[i] = (uint32_t)(i + 77u);
  kvtier_key keys[2];
  EXPECT(kvtier_keys_for(c, tokens, 2 * kBlockTokens, NULL, keys, 2) == 2);
  HugeAndEmptyPayloads(c, keys);
  WorkingSlotArguments(c);
  ConnectOptions(argv[1], &ns);
  EngineHashes(argv[1], ns, c);
  kvtier_close(c);
  printf("c_abi_arguments: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
