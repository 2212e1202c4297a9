// The engine's row-wise operators on the GPU (kvtier_ops_gpu): the same contracts as the CPU
// references in kernels/ops/*.h (namespace ops::ref), on 16-bit tensors — bf16 or fp16, chosen by
// DType — with float32 arithmetic inside. Every GPU kernel is tested against its reference with a
// stated tolerance (tests/kernels/ops_gpu_test.cc).
//
// Conventions for every function here and in attention_gpu.h / gemm_gpu.h:
// - Pointers are device memory (or mapped pinned host memory), caller-owned; shapes are given as
//   in the reference's header. 16-bit tensors are passed as void*.
// - The call enqueues work on `stream` and returns; results are there once the stream gets past it.
// - Arguments are checked (shapes positive, alignment of the 16-byte accesses the kernels make,
//   supported head sizes): a violation is InvalidArgument naming the operator and the value.
//   Contents (token ids within the vocabulary, slots within the pool) are the caller's contract,
//   as with the references. A launch failure is the vendor's error as a Status.
// - In the CPU-only build every call answers FailedPrecondition.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "kernels/ops/paged_kv.h"
#include "kernels/ops/sampling.h"

namespace kvtier::ops::gpu {

using StreamHandle = ::kvtier::gpu::StreamHandle;

enum class DType { kBf16, kFp16 };
const char* DTypeName(DType dtype);

// ids [n] (device int32); table [vocab, hidden]; out [n, hidden]. hidden a multiple of 8.
absl::Status Embedding(DType dtype, const int32_t* ids, int64_t n, const void* table,
                       int64_t hidden, void* out, StreamHandle stream);

// x, out [rows, dim] (out may be x); weight [dim]. dim a multiple of 8.
absl::Status RmsNorm(DType dtype, const void* x, const void* weight, int64_t rows, int64_t dim,
                     float eps, void* out, StreamHandle stream);

// residual += input (rounded to dtype, as transformers adds in the model's dtype); then
// input = RmsNorm(residual) * weight. input, residual [rows, dim]; dim a multiple of 8.
absl::Status FusedAddRmsNorm(DType dtype, void* input, void* residual, const void* weight,
                             int64_t rows, int64_t dim, float eps, StreamHandle stream);

// Neox-style rotation in place of x [n, heads, head_dim], token i's heads starting at
// x + i * token_stride (token_stride >= heads * head_dim, so q and k can be rotated where they lie
// in a fused qkv output). positions [n] int32, inv_freq [head_dim / 2] float (device memory).
absl::Status ApplyRope(DType dtype, void* x, int64_t token_stride, const int32_t* positions,
                       const float* inv_freq, int64_t n, int64_t heads, int64_t head_dim,
                       StreamHandle stream);

// gate_up [n, 2d] -> out [n, d]; d a multiple of 8.
absl::Status SiluAndMul(DType dtype, const void* gate_up, int64_t n, int64_t d, void* out,
                        StreamHandle stream);

// Stores n tokens' K and V of `layer` into the pool (ref::WriteKv's contract), the pool's elements
// being 16-bit. Token i's K row (kv_heads * head_dim elements) is at k + i * src_token_stride, its
// V row at v + i * src_token_stride. token_slots [n] int64 (device memory). kv_heads * head_dim and
// src_token_stride multiples of 8.
absl::Status WriteKv(const void* k, const void* v, int64_t src_token_stride,
                     const int64_t* token_slots, int64_t n, const PagedKvGeometry& geometry,
                     int64_t layer, void* pool, StreamHandle stream);

// ApplyRope of q and k followed by WriteKv of k and v, in one launch (what a decode step does to
// its one token between the qkv projection and attention). Token i's q heads [q_heads, head_dim]
// at q + i * q_token_stride are rotated in place; its K heads [kv_heads, head_dim] at
// k + i * kv_token_stride are rotated and stored into the pool (k itself is left as it was) and its
// V heads at v + i * kv_token_stride stored as they are. head_dim and kv_heads are the pool
// geometry's; the other contracts are ApplyRope's and WriteKv's.
absl::Status RopeAndWriteKv(DType dtype, void* q, int64_t q_token_stride, int64_t q_heads,
                            const void* k, const void* v, int64_t kv_token_stride,
                            const int32_t* positions, const float* inv_freq,
                            const int64_t* token_slots, int64_t n, const PagedKvGeometry& geometry,
                            int64_t layer, void* pool, StreamHandle stream);

// Greedy sampling: out[r] = the index of the largest of logits [rows, vocab] (float), the lowest
// among equal ones (ref::Argmax). out is device int32 [rows].
absl::Status Argmax(const float* logits, int64_t rows, int64_t vocab, int32_t* out,
                    StreamHandle stream);

// Sampling: out[0] = the token ref::Sample (sampling.h) chooses from logits [vocab] (float) with
// `params` (temperature > 0; greedy is Argmax) for draw `step`, by radix searches over the tokens'
// rank instead of a sort (sampling_kernel.cu), in one thread block. Probabilities are summed as
// 64-bit fixed point (2^-44 of the top token's), exactly, so a (seed, step) gives the same token on
// every run; the reference sums doubles, so the two can differ only when a cut (top-p, the draw)
// falls within that rounding (< 1e-8 relative) of a cumulative mass. vocab <= 2^19.
// workspace: SampleWorkspaceBytes(vocab) of device memory, 8-byte aligned; out: device int32 [1].
inline int64_t SampleWorkspaceBytes(int64_t vocab) { return vocab * 8; }
absl::Status Sample(const float* logits, int64_t vocab, const SamplingParams& params, uint64_t step,
                    void* workspace, int64_t workspace_bytes, int32_t* out, StreamHandle stream);

// The decode step's kernels (RMSNorm, SiLU-and-mul, Gemv, RopeAndWriteKv, attention decode) are
// launched as
// programmatic dependents where the device has it (CUDA sm_90: each may start while the kernel
// before it finishes, and waits on the device for its results; kernels/ops/gpu/pdl.h). On by
// default; off launches them plainly — a switch for comparisons and for ruling PDL out when
// hunting a race. It applies to launches from now on (a graph keeps what it recorded); any thread.
void SetProgrammaticLaunch(bool on);

}  // namespace kvtier::ops::gpu
