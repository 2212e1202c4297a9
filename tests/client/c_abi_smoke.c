/* The C ABI from C: kvtier_client_c.h compiles as strict C11, and every call works against a real
 * kvtierd (started by with_kvtierd.sh, which passes its socket as argv[1]): keys, put, lookup,
 * get with zero-copy reads of the leased slots, release, get_into, drop, stats, errors (and the
 * GPU calls that need no GPU). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/kvtier_client_c.h"
#include "tests/client/c_abi_expect.h"

enum { kBlocks = 3, kBlockTokens = 16, kPayloadBytes = 4096 };


static void Fill(unsigned char* payloads, uint32_t* tokens) {
  for (size_t i = 0; i < (size_t)kBlocks * kPayloadBytes; ++i) {
    payloads[i] = (unsigned char)(i * 131u + 7u);
  }
  for (size_t i = 0; i < (size_t)kBlocks * kBlockTokens; ++i) tokens[i] = (uint32_t)(i + 1000u);
}

static void PutLookupGet(kvtier_client* c, const kvtier_key* keys, unsigned char* payloads) {
  const void* srcs[kBlocks];
  size_t sizes[kBlocks];
  uint32_t codes[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    srcs[i] = payloads + (size_t)i * kPayloadBytes;
    sizes[i] = kPayloadBytes;
  }
  EXPECT(kvtier_put(c, keys, kBlocks, srcs, sizes, NULL, codes) == 0);
  for (int i = 0; i < kBlocks; ++i) EXPECT(codes[i] == KVTIER_BLOCK_OK);
  EXPECT(kvtier_put(c, keys, kBlocks, srcs, sizes, NULL, codes) == 0);
  EXPECT(codes[0] == KVTIER_BLOCK_ALREADY_PRESENT);

  size_t hit = 0;
  uint8_t tiers[kBlocks];
  EXPECT(kvtier_lookup(c, keys, kBlocks, &hit, tiers) == 0);
  EXPECT(hit == kBlocks);
  EXPECT((tiers[0] & 2u) != 0); /* in T1 */

  kvtier_block_result results[kBlocks];
  EXPECT(kvtier_get(c, keys, kBlocks, results) == 0);
  for (int i = 0; i < kBlocks; ++i) {
    EXPECT(results[i].code == KVTIER_BLOCK_OK && results[i].payload_bytes == kPayloadBytes);
    const void* slot = kvtier_slot_data(c, results[i].slot);
    EXPECT(slot != NULL && memcmp(slot, srcs[i], kPayloadBytes) == 0);
  }
  EXPECT(kvtier_release(c, keys, kBlocks, results) == 0);
}

static void GetIntoDropStats(kvtier_client* c, const kvtier_key* keys, unsigned char* payloads) {
  static unsigned char out[kBlocks * kPayloadBytes];
  void* dsts[kBlocks];
  size_t room[kBlocks];
  for (int i = 0; i < kBlocks; ++i) {
    dsts[i] = out + (size_t)i * kPayloadBytes;
    room[i] = kPayloadBytes;
  }
  size_t copied = 0;
  EXPECT(kvtier_get_into(c, keys, kBlocks, dsts, room, &copied) == 0);
  EXPECT(copied == kBlocks && memcmp(out, payloads, sizeof(out)) == 0);

  kvtier_stats stats;
  EXPECT(kvtier_get_stats(c, &stats) == 0);
  EXPECT(stats.puts_committed >= kBlocks && stats.leases_held == 0);

  kvtier_block_result results[kBlocks];
  EXPECT(kvtier_drop(c, keys, kBlocks, results) == 0);
  EXPECT(results[0].code == KVTIER_BLOCK_OK);
  size_t hit = 1;
  EXPECT(kvtier_lookup(c, keys, kBlocks, &hit, NULL) == 0 && hit == 0);
  EXPECT(kvtier_lookup(c, keys, kBlocks, NULL, NULL) == 3); /* NULL hit_blocks: invalid arg */
  EXPECT(strstr(kvtier_last_error(), "hit_blocks") != NULL);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]);
    return 2;
  }
  kvtier_namespace ns;
  memset(&ns, 0, sizeof(ns)); /* NULL strings and zeros: the defaults */
  kvtier_client* c = NULL;
  EXPECT(kvtier_connect(argv[1], &ns, "c-smoke", &c) == 3); /* model_id is required */
  ns.model_id = "c-smoke-model";
  if (kvtier_connect(argv[1], &ns, "c-smoke", &c) != 0) {
    fprintf(stderr, "kvtier_connect(%s): %s\n", argv[1], kvtier_last_error());
    return 1;
  }
  EXPECT(kvtier_slot_bytes(c) >= kPayloadBytes);

  static unsigned char payloads[kBlocks * kPayloadBytes];
  uint32_t tokens[kBlocks * kBlockTokens + 5]; /* + a partial block, which has no key */
  Fill(payloads, tokens);
  kvtier_key keys[kBlocks];
  EXPECT(kvtier_keys_for(c, tokens, sizeof(tokens) / sizeof(tokens[0]), NULL, keys, kBlocks) ==
         kBlocks);
  PutLookupGet(c, keys, payloads);
  GetIntoDropStats(c, keys, payloads);
  /* The T0 calls answer for a NULL GPU client (no GPU needed). */
  EXPECT(kvtier_gpu_set_t0_reads(NULL, KVTIER_T0_READS_ALWAYS) == 3);
  EXPECT(kvtier_gpu_t0_mapped(NULL) == 0);
  EXPECT(kvtier_abi_version() == KVTIER_C_ABI_VERSION);
  kvtier_close(c);
  printf("c_abi_smoke: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
