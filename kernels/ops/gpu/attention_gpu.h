// Attention on the GPU over the paged pool in the daemon's payload layout (kernels/ops/attention.h
// states the semantics, ops_gpu.h the conventions). The pool holds 16-bit K/V; queries and outputs
// are 16-bit of the same format; softmax and accumulation are float32.
//
// Supported: head_dim 16, 32, 64 or 128; query heads a multiple of KV heads; for decode at most 8
// query heads per KV head. q_token_stride a multiple of 8.
#pragma once

#include <cstdint>

#include "kernels/ops/attention.h"
#include "kernels/ops/gpu/ops_gpu.h"

namespace kvtier::ops::gpu {

// Where a batch's queries and K/V are (device memory; shapes as in attention.h).
struct AttentionBatch {
  const void* q = nullptr;                // token i's query heads at q + i * q_token_stride
  int64_t q_token_stride = 0;             // elements, a multiple of 8; 0: q_heads * head_dim
  const int32_t* kv_lens = nullptr;       // [batch]
  const int32_t* block_tables = nullptr;  // [batch, max_blocks]
  int64_t max_blocks = 0;
  int64_t batch = 0;
  const void* pool = nullptr;  // [num_slots, slot_elems]
  void* out = nullptr;         // [rows, q_heads, head_dim], contiguous
};

// Prefill's split over the keys (flash-decoding for prefill): a thread block owns one query tile
// (up to 128 rows of (token, query head) pairs) of one KV head and sequence, so a short chunk over
// a long context — 16 tokens after an 8K cached prefix — leaves most multiprocessors idle while a
// few blocks stream every key. Given a workspace and the context's bound, AttentionPrefill cuts
// each block's keys into PrefillSplits pieces, one thread block each, writes their partial
// outputs and log-sum-exps to the workspace, and merges them (the decode split's combine).
inline constexpr int64_t kMaxPrefillSplits = 32;
inline constexpr int64_t kMinKeysPerPrefillSplit = 256;  // two of the Hopper kernels' key tiles

// Bytes of workspace that let a batch of up to `rows` query rows (batch * max_q_len) split into
// kMaxPrefillSplits pieces; a smaller one splits into fewer.
inline int64_t AttentionPrefillWorkspaceBytes(const AttentionParams& params, int64_t rows) {
  return rows * params.q_heads * kMaxPrefillSplits * (params.kv.head_dim + 1) *
         static_cast<int64_t>(sizeof(float));
}

// What the split needs from the caller; the default splits nothing.
struct PrefillSplitSpace {
  int64_t max_kv_len = 0;     // host bound of every kv_lens[b]; 0: unknown, no split
  void* workspace = nullptr;  // device memory, 16-byte aligned, not used by other work meanwhile
  int64_t workspace_bytes = 0;
};

// The plan (pure; host side): into how many pieces each block's keys are cut. blocks: thread
// blocks without the split (query tiles x KV heads x sequences); span: the most keys one block
// reads; fit: the most pieces the workspace holds. One (no split) unless the blocks fill under half
// of the multiprocessors; else as many pieces as keep blocks x pieces within the multiprocessors
// (the Hopper kernels run one block per multiprocessor: one wave), none shorter than
// kMinKeysPerPrefillSplit keys, at most kMaxPrefillSplits and `fit`.
inline int64_t PrefillSplits(int64_t blocks, int64_t multiprocessors, int64_t span, int64_t fit) {
  if (blocks <= 0 || 2 * blocks > multiprocessors) return 1;
  int64_t splits = multiprocessors / blocks;
  splits = splits < span / kMinKeysPerPrefillSplit ? splits : span / kMinKeysPerPrefillSplit;
  splits = splits < fit ? splits : fit;
  splits = splits < kMaxPrefillSplits ? splits : kMaxPrefillSplits;
  return splits > 1 ? splits : 1;
}

// Prefill (flash-attention style): on tensor cores where the device has warp-level matrix multiply
// and head_dim is 64 or 128 (attention_prefill_mma_kernel.cu), else the portable SIMT kernel
// (attention_prefill_kernel.cu). q_indptr [batch+1] device int32; max_q_len (a host value) at
// least every sequence's query count — the engine knows it when it builds the batch. `split`:
// what the split over the keys needs (above); every kernel honours it, and the result is the
// unsplit one up to float32 rounding of the merge.
absl::Status AttentionPrefill(DType dtype, const AttentionParams& params,
                              const AttentionBatch& batch, const int32_t* q_indptr,
                              int64_t max_q_len, StreamHandle stream,
                              const PrefillSplitSpace& split = {});

// The portable SIMT kernel whatever the device: what the HIP build runs, for tests and benchmarks.
absl::Status AttentionPrefillPortable(DType dtype, const AttentionParams& params,
                                      const AttentionBatch& batch, const int32_t* q_indptr,
                                      int64_t max_q_len, StreamHandle stream,
                                      const PrefillSplitSpace& split = {});

// Bytes of device scratch AttentionDecode needs for this batch and head shape: a partial output and
// log-sum-exp for each of up to kMaxDecodeSplits pieces of every (sequence, query head).
inline constexpr int64_t kMaxDecodeSplits = 64;
inline int64_t AttentionDecodeWorkspaceBytes(const AttentionParams& params, int64_t batch) {
  return batch * params.q_heads * kMaxDecodeSplits * (params.kv.head_dim + 1) *
         static_cast<int64_t>(sizeof(float));
}

// Decode: one query per sequence. max_kv_len (host) at least every kv_lens[b]; it decides how many
// pieces each sequence is split into. workspace: AttentionDecodeWorkspaceBytes of device memory,
// 16-byte aligned, not used by other work on other streams meanwhile.
absl::Status AttentionDecode(DType dtype, const AttentionParams& params,
                             const AttentionBatch& batch, int64_t max_kv_len, void* workspace,
                             int64_t workspace_bytes, StreamHandle stream);

}  // namespace kvtier::ops::gpu
