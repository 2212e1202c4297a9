// The XXH3-64 of a block payload (BlockRecord::checksum, put_commit's checksum), as fast as this
// CPU allows. T2 verifies every read with it, the tier manager computes what it writes to T2 with
// it, clients checksum their puts with it and the daemon verifies them.
//
// Debian's libxxhash is built for baseline x86-64 (SSE2): ~3 GB/s on one core of the development
// VM for 4 MiB payloads, which made read verification the bottleneck. On CPUs with AVX2 this uses
// an AVX2 build of the same algorithm (xxhash.h inlined, ~1.7x faster there); elsewhere the
// library. Both give the same value: XXH3 is defined by its output, not by its vector width.
//
// Thread-safe; no state.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvtier {

uint64_t PayloadChecksum(const void* data, size_t bytes);

// Copies `bytes` from `src` to `dst` (which must not overlap) and returns PayloadChecksum(src,
// bytes), in one pass (a client's put). With AVX2, XXH3's long loop is fused with the copy: each
// 64-byte stripe is loaded once, stored, and folded into the hash from the same registers, so the
// checksum costs almost nothing next to the copy (checksum_avx2.cc). Without AVX2, 64 KiB chunks
// are copied and hashed while still in the cache.
//
// From kStreamCopyMinBytes up (with AVX2, to a 32-byte aligned `dst`) the copy uses non-temporal
// stores: a put's destination is a T1 slot that this thread will not read again and that is too
// large to stay cached anyway, so writing it without first reading every line into the cache (what
// memcpy does) halves the memory traffic. The copy is complete and visible to other threads (store
// fence) when this returns, like memcpy's.
inline constexpr size_t kStreamCopyMinBytes = 256 * 1024;
uint64_t CopyAndChecksum(void* dst, const void* src, size_t bytes);

}  // namespace kvtier
