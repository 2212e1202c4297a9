// Internal to kernels/: what the CPU reference and both GPU paths of kernels/kv_copy.h share, so
// they accept exactly the same arguments and agree on where every byte goes.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/status.h"
#include "kernels/gpu_runtime.h"
#include "kernels/kv_copy.h"
#include "kernels/kv_layout.h"

namespace kvtier::kv_copy_internal {

// The argument checks of KvCopier::Copy and CopyKvReference: a valid layout, spans of one length,
// non-negative block ids, no null payload.
absl::Status CheckCopyArgs(const PagedKvCache& cache, std::span<const int32_t> engine_blocks,
                           std::span<void* const> payloads);

// Address of the engine's piece (layer, kv: 0 = K, 1 = V) of `block`, and of the same piece in a
// payload.
char* CachePiece(const PagedKvCache& cache, uint32_t layer, uint32_t kv, int32_t block);
char* PayloadPiece(const PagedKvCache& cache, void* payload, uint32_t layer, uint32_t kv);

// The DMA path's copies, one per (block, layer, K|V) piece in payload order, with pieces that are
// adjacent on both sides merged into one copy. Needs cache.pieces_contiguous(). Replaces `ops`.
void PlanPieceCopies(const PagedKvCache& cache, KvCopyDirection direction,
                     std::span<const int32_t> engine_blocks, std::span<void* const> payloads,
                     std::vector<gpu::CopyOp>& ops);

// The widest access unit (16, 8, 4, 2 or 1 bytes) that divides the row size, every stride and
// every base and payload address: the kernel moves rows in units of this many bytes.
uint32_t CopyUnitBytes(const PagedKvCache& cache, std::span<void* const> payloads);

}  // namespace kvtier::kv_copy_internal
