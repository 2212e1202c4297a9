// Internal to kernels/ops/gpu: the launchers the device sources (*.cu) export to the host wrappers
// (*.cc). Device-safe: no runtime or abseil headers. Every launcher enqueues on `stream` and
// returns the vendor's error code (0 = success); arguments were checked by the wrapper.
//
// 16-bit tensors are uint16_t arrays whose format is `bf16` (true) or fp16 (false).
#pragma once

#include <cstdint>

namespace kvtier::ops::gpu_launch {

// Same layout as kvtier::ops::PagedKvGeometry (paged_kv.h), in plain integers.
struct KvGeometry {
  int64_t layers = 0;
  int64_t block_tokens = 0;
  int64_t kv_heads = 0;
  int64_t head_dim = 0;
};

int Embedding(bool bf16, const int32_t* ids, int64_t n, const uint16_t* table, int64_t hidden,
              uint16_t* out, void* stream);
// residual == nullptr: plain RMSNorm of x into out. Otherwise the fused add: residual += x, then
// out = RmsNorm(residual) (out may be x).
int RmsNorm(bool bf16, const uint16_t* x, uint16_t* residual, const uint16_t* weight, int64_t rows,
            int64_t dim, float eps, uint16_t* out, void* stream);
int Rope(bool bf16, uint16_t* x, int64_t token_stride, const int32_t* positions,
         const float* inv_freq, int64_t n, int64_t heads, int64_t head_dim, void* stream);
int SiluAndMul(bool bf16, const uint16_t* gate_up, int64_t n, int64_t d, uint16_t* out,
               void* stream);
int WriteKv(const uint16_t* k, const uint16_t* v, int64_t src_token_stride,
            const int64_t* token_slots, int64_t n, const KvGeometry& g, int64_t layer,
            uint16_t* pool, void* stream);
// RopeAndWriteKv (ops_gpu.h): q rotated in place, k rotated into the pool, v copied there.
struct RopeWriteKvArgs {
  uint16_t* q = nullptr;
  int64_t q_token_stride = 0;
  int64_t q_heads = 0;
  const uint16_t* k = nullptr;
  const uint16_t* v = nullptr;
  int64_t kv_token_stride = 0;
  const int32_t* positions = nullptr;
  const float* inv_freq = nullptr;
  const int64_t* token_slots = nullptr;
  KvGeometry kv;
  int64_t layer = 0;
  uint16_t* pool = nullptr;
};
int RopeWriteKv(bool bf16, const RopeWriteKvArgs& a, int64_t n, void* stream);

// y [m, n] float += bias [n] (16-bit): the bias of a float-output GEMM where the library's fused
// epilogue cannot take a 16-bit bias.
int AddBiasToFloat(bool bf16, float* y, const uint16_t* bias, int64_t m, int64_t n, void* stream);
int Argmax(const float* logits, int64_t rows, int64_t vocab, int32_t* out, void* stream);

struct AttentionArgs {
  KvGeometry kv;
  int64_t layer = 0;
  int64_t q_heads = 0;
  float scale = 0;
  int64_t sliding_window = 0;
  const uint16_t* q = nullptr;
  int64_t q_token_stride = 0;  // elements between consecutive tokens' queries
  const int32_t* kv_lens = nullptr;
  const int32_t* block_tables = nullptr;
  int64_t max_blocks = 0;
  int64_t batch = 0;
  const uint16_t* pool = nullptr;
  uint16_t* out = nullptr;  // [rows, q_heads, head_dim], contiguous
  // AttentionPrefill split over the keys (attention_split.cuh): each block's key range is cut into
  // kv_splits runs of whole key tiles, one thread block each; with kv_splits > 1 a block writes
  // its rows' normalized partial output and log2-sum-exp instead of `out`, into
  // partial_out [rows, q_heads, kv_splits, head_dim] and partial_lse [rows, q_heads, kv_splits]
  // (rows: the batch's query tokens, in q order), and AttentionCombine merges them.
  int kv_splits = 1;
  float* partial_out = nullptr;
  float* partial_lse = nullptr;
};

// q_indptr [batch + 1]; max_q_len >= every sequence's query count. The tensor-core kernel where
// the device and head size allow it and `allow_mma`, else the portable SIMT kernel. With
// a.kv_splits > 1 the kernel writes partial results and the combine follows (every kernel splits).
int AttentionPrefill(bool bf16, const AttentionArgs& a, const int32_t* q_indptr, int64_t max_q_len,
                     bool allow_mma, void* stream);

// The tensor-core kernel alone (attention_prefill_mma_kernel.cu): kNoMmaKernel when this target,
// device or head size has none (nothing launched), else the vendor's code.
inline constexpr int kNoMmaKernel = -1;
int AttentionPrefillMma(bool bf16, const AttentionArgs& a, const int32_t* q_indptr,
                        int64_t max_q_len, void* stream);

// Split over the sequence: `splits` partial results per (sequence, head) go to
// partial_out [batch, q_heads, splits, head_dim] and partial_lse [batch, q_heads, splits] (both
// float, unused when splits == 1), `chunk` keys per split, then a combine launch.
int AttentionDecode(bool bf16, const AttentionArgs& a, int splits, int64_t chunk,
                    float* partial_out, float* partial_lse, void* stream);

// The merge of split attention (attention_decode_kernel.cu): for each (row, head) with
// row < rows — and row < *rows_end when rows_end is not null (a device count, such as
// q_indptr[batch]) — out[row, head] = the splits' partial outputs weighted by
// exp2(lse - max lse); splits whose lse is -inf (they saw no key) count nothing. Layouts as
// AttentionArgs::partial_out / partial_lse.
int AttentionCombine(bool bf16, int64_t splits, int64_t rows, const int32_t* rows_end,
                     int64_t q_heads, int64_t head_dim, const float* partial_out,
                     const float* partial_lse, uint16_t* out, void* stream);

// y [m, n] = x [m, k] * w [n, k]^T (+ bias [n]), fp32 accumulation; y is 16-bit (same format as
// x) or float (y_float). k a multiple of 8.
int GemmTiled(bool bf16, const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t m,
              int64_t n, int64_t k, void* y, bool y_float, void* stream);

// Sample (ops_gpu.h): one block; workspace [vocab] 64-bit.
int Sample(const float* logits, int64_t vocab, float temperature, int32_t top_k, float top_p,
           uint64_t seed, uint64_t step, uint64_t* workspace, int32_t* out, void* stream);

// Gemv (gemm_gpu.h): the same product for m <= 4 rows, memory-bound (gemv_kernel.cu). silu_mul:
// x is [m, 2k] (gate | up) and the product's input is SiluAndMul of it.
int Gemv(bool bf16, const uint16_t* x, const uint16_t* w, const uint16_t* bias, int64_t m,
         int64_t n, int64_t k, void* y, bool y_float, bool silu_mul, void* stream);

// Whether pdl::Launch (pdl.h) asks for programmatic dependent launch (SetProgrammaticLaunch in
// ops_gpu.h; on unless switched off).
bool ProgrammaticLaunchOn();

}  // namespace kvtier::ops::gpu_launch
