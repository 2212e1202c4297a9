/* kvtier_lookup_many from C against a real kvtierd (started by with_kvtierd.sh, which passes its
 * socket as argv[1]): for every sequence it answers what kvtier_lookup answers for that sequence
 * alone (hit prefix and tiers) over a mix of full hits, partial hits, misses, a cached block after
 * a missing one, empty sequences, sequences too long for one pipelined request (over the arena
 * part, over max_batch) and more sequences than the request window; and its argument errors. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "client/kvtier_client_c.h"
#include "tests/client/c_abi_expect.h"

enum {
  kBlockTokens = 16,
  kPayloadBytes = 64,
  kShort = 700,            /* more than the daemon's request window (256 by default) */
  kOverPart = 600,         /* keys: more than one window part of the arena holds, under max_batch */
  kOverBatch = 1100,       /* keys: more than max_batch (1024) */
  kSeqs = kShort + 2,      /* the short ones, then the two long ones */
  kLongCached = 10         /* leading blocks of each long sequence that are cached */
};


/* Short sequence i: 0 to 6 blocks; every eighth one empty. */
static size_t ShortLength(size_t i) { return i % 8 == 7 ? 0 : 1 + i % 7; }

/* What is stored of short sequence i, as [from, from + count) of its blocks: all of it (i % 8 ==
 * 0), its first half (1), its second block only (2: cached, but after a miss), nothing (else). */
static void StoredPart(size_t i, size_t length, size_t* from, size_t* count) {
  *from = 0;
  *count = 0;
  if (i % 8 == 0) *count = length;
  if (i % 8 == 1) *count = length / 2;
  if (i % 8 == 2 && length >= 2) {
    *from = 1;
    *count = 1;
  }
}

static size_t ExpectedHit(size_t i) {
  if (i >= kShort) return kLongCached;
  size_t from, count;
  StoredPart(i, ShortLength(i), &from, &count);
  return from == 0 ? count : 0;
}

/* The keys of every sequence, concatenated, from distinct tokens per sequence. */
static kvtier_key* MakeKeys(kvtier_client* c, size_t* lengths, size_t* total) {
  *total = 0;
  for (size_t i = 0; i < kSeqs; ++i) {
    lengths[i] = i < kShort ? ShortLength(i) : (i == kShort ? kOverPart : kOverBatch);
    *total += lengths[i];
  }
  kvtier_key* keys = malloc(*total * sizeof(kvtier_key));
  uint32_t* tokens = malloc((size_t)kOverBatch * kBlockTokens * sizeof(uint32_t));
  size_t offset = 0;
  for (size_t i = 0; i < kSeqs; ++i) {
    const size_t n_tokens = lengths[i] * kBlockTokens;
    for (size_t t = 0; t < n_tokens; ++t) tokens[t] = (uint32_t)(i * 1000003u + t + 17u);
    EXPECT(kvtier_keys_for(c, tokens, n_tokens, NULL, keys + offset, lengths[i]) == lengths[i]);
    offset += lengths[i];
  }
  free(tokens);
  return keys;
}

static void Put(kvtier_client* c, const kvtier_key* keys, size_t from, size_t count) {
  static unsigned char payload[kPayloadBytes];
  const void* srcs[kLongCached];
  size_t sizes[kLongCached];
  uint32_t codes[kLongCached];
  if (count == 0) return;
  for (size_t i = 0; i < count; ++i) {
    srcs[i] = payload;
    sizes[i] = sizeof(payload);
  }
  EXPECT(count <= kLongCached);
  EXPECT(kvtier_put(c, keys + from, count, srcs, sizes, from == 0 ? NULL : keys + from - 1,
                    codes) == 0);
  for (size_t i = 0; i < count; ++i) EXPECT(codes[i] == KVTIER_BLOCK_OK);
}

static void Store(kvtier_client* c, const kvtier_key* keys, const size_t* lengths) {
  size_t offset = 0;
  for (size_t i = 0; i < kSeqs; ++i) {
    size_t from = 0, count = kLongCached;
    if (i < kShort) StoredPart(i, lengths[i], &from, &count);
    Put(c, keys + offset, from, count);
    offset += lengths[i];
  }
}

/* kvtier_lookup_many equals kvtier_lookup of each sequence, and the hits are the ones stored. */
static void CompareWithLookup(kvtier_client* c, const kvtier_key* keys, const size_t* lengths,
                              size_t total) {
  size_t* hits = malloc(kSeqs * sizeof(size_t));
  size_t* hits_no_tiers = malloc(kSeqs * sizeof(size_t));
  uint8_t* tiers = malloc(total);
  uint8_t* alone = malloc(kOverBatch);
  EXPECT(kvtier_lookup_many(c, keys, lengths, kSeqs, hits, tiers) == 0);
  EXPECT(kvtier_lookup_many(c, keys, lengths, kSeqs, hits_no_tiers, NULL) == 0);
  size_t offset = 0;
  for (size_t i = 0; i < kSeqs; ++i) {
    size_t hit = (size_t)-1;
    EXPECT(kvtier_lookup(c, keys + offset, lengths[i], &hit, alone) == 0);
    EXPECT(hits[i] == hit && hits_no_tiers[i] == hit);
    EXPECT(hit == ExpectedHit(i));
    EXPECT(hit == 0 || memcmp(tiers + offset, alone, hit) == 0);
    for (size_t b = 0; b < hits[i] && b < lengths[i]; ++b) EXPECT((tiers[offset + b] & 2u) != 0);
    if (hits[i] != hit || hit != ExpectedHit(i)) fprintf(stderr, "  sequence %zu\n", i);
    offset += lengths[i];
  }
  free(alone);
  free(tiers);
  free(hits_no_tiers);
  free(hits);
}

static void Errors(kvtier_client* c, const kvtier_key* keys) {
  size_t lengths[2] = {1, 2};
  size_t hits[2] = {7, 7};
  EXPECT(kvtier_lookup_many(c, NULL, NULL, 0, NULL, NULL) == 0); /* nothing to look up */
  EXPECT(kvtier_lookup_many(c, keys, NULL, 2, hits, NULL) == 3);
  EXPECT(strstr(kvtier_last_error(), "lengths") != NULL);
  EXPECT(kvtier_lookup_many(c, keys, lengths, 2, NULL, NULL) == 3);
  EXPECT(strstr(kvtier_last_error(), "hit_blocks") != NULL);
  EXPECT(kvtier_lookup_many(c, NULL, lengths, 2, hits, NULL) == 3);
  EXPECT(strstr(kvtier_last_error(), "keys") != NULL);
  EXPECT(kvtier_lookup_many(NULL, keys, lengths, 2, hits, NULL) == 3);
  EXPECT(strstr(kvtier_last_error(), "client") != NULL);
  size_t overflow[2] = {SIZE_MAX, 1};
  EXPECT(kvtier_lookup_many(c, keys, overflow, 2, hits, NULL) == 3);
  EXPECT(strstr(kvtier_last_error(), "lengths") != NULL);
  size_t too_many[2] = {SIZE_MAX / sizeof(kvtier_key), 1}; /* no array of keys is that long */
  EXPECT(kvtier_lookup_many(c, keys, too_many, 2, hits, NULL) == 3);
  EXPECT(strstr(kvtier_last_error(), "lengths") != NULL);
  size_t empty[2] = {0, 0}; /* empty sequences need no keys */
  EXPECT(kvtier_lookup_many(c, NULL, empty, 2, hits, NULL) == 0);
  EXPECT(hits[0] == 0 && hits[1] == 0);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s SOCKET_PATH\n", argv[0]);
    return 2;
  }
  kvtier_namespace ns;
  memset(&ns, 0, sizeof(ns));
  ns.model_id = "c-lookup-many-model";
  ns.block_tokens = kBlockTokens;
  kvtier_client* c = NULL;
  if (kvtier_connect(argv[1], &ns, "c-lookup-many", &c) != 0) {
    fprintf(stderr, "kvtier_connect(%s): %s\n", argv[1], kvtier_last_error());
    return 1;
  }
  size_t lengths[kSeqs];
  size_t total = 0;
  kvtier_key* keys = MakeKeys(c, lengths, &total);
  Store(c, keys, lengths);
  CompareWithLookup(c, keys, lengths, total);
  Errors(c, keys);
  free(keys);
  kvtier_close(c);
  printf("c_abi_lookup_many: %s\n", failures == 0 ? "ok" : "FAILED");
  return failures == 0 ? 0 : 1;
}
