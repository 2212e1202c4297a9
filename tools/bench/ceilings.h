// The ceilings `kvtier bench` prints next to its figures, measured in the same run on the same
// machine (docs/benchmarks.md): what the daemon's path could at best approach.
#pragma once

#include <cstdint>

#include "common/status.h"
#include "tools/bench/latency_histogram.h"

namespace kvtier::bench {

// Round trips over a Unix-domain socketpair to a forked echo process: `request_bytes` written and
// read one way, `response_bytes` the other, as one write and one full read each. Runs `ops` round
// trips, or for `duration_s` when ops is 0. Call before starting threads (it forks).
absl::StatusOr<LatencyHistogram> SocketRoundTrips(uint32_t request_bytes, uint32_t response_bytes,
                                                  uint64_t ops, double duration_s);

// The request and response bytes of a lookup of `keys` keys on the rings: one 64-byte record and
// 16 bytes per key out; one 64-byte completion and one tier mask byte per key back.
inline uint32_t LookupRequestBytes(uint32_t keys) { return 64 + 16 * keys; }
inline uint32_t LookupResponseBytes(uint32_t keys) { return 64 + keys; }

// Which side of the copy is cold, as in the op it is the ceiling of: a put copies the client's
// buffer (hot, reused) into T1 slots all over the segment; a get copies slots into the client's.
enum class CopyDirection { kIntoCold, kOutOfCold };

// Aggregate memcpy bandwidth in bytes/s: `threads` threads each copy `block_bytes` between one
// block of their own and successive blocks of a 256 MiB region of their own (so that side misses
// the caches, as T1 slots do), for `duration_s` seconds, all starting together.
double MemcpyBandwidth(uint32_t threads, uint32_t block_bytes, double duration_s,
                       CopyDirection direction);

// The same copies into (or out of) memory shaped like T1: one shared memfd segment of
// `region_bytes` (the daemon's T1 size, 4 KiB pages, mapped and faulted in like a client's T1
// mapping), its block-sized slots visited in a shuffled order, each thread in its own part. What
// this adds to MemcpyBandwidth's ceiling is the page-table walks of a large region and the
// scattered slots a real put meets. InternalError when the segment cannot be had.
absl::StatusOr<double> MemcpyT1ShapedBandwidth(uint32_t threads, uint32_t block_bytes,
                                               uint64_t region_bytes, double duration_s,
                                               CopyDirection direction);

}  // namespace kvtier::bench
