// Internal to index/: one factory per eviction policy, each defined in its own .cc file and called
// by MakeEvictionPolicy (eviction_policy.cc), which validates the config first. Each returns a
// policy with the contract of eviction_policy.h; the per-policy rules for Evict are stated beside
// each.
//
// Calling convention the policies are tuned for (the replay tool's and a watermark tier's): on a
// miss, Insert, then Evict while over capacity. The published algorithms make room first and insert
// after, so SIEVE, S3-FIFO and ARC keep the latest Insert out of the running until the next
// successful Evict (or any other call): their victims are then exactly the papers'. The latest
// block is chosen only when no other resident block is acceptable. LRU and FIFO need no such care
// (the newest block is their last choice anyway). Callers that evict first and insert after get
// correct, slightly different victims (the previous newcomer may still be held back).
//
// Rejected blocks (can_evict false) are passed over untouched: not moved, not aged, bits not
// cleared. The policies' own moves (SIEVE clearing visited bits, S3-FIFO promoting and reinserting,
// ARC choosing a list) apply only to accepted blocks, so an Evict that rejects everything changes
// nothing.
#pragma once

#include <cstddef>
#include <memory>

#include "index/eviction_policy.h"

namespace kvtier {

// Least recently used: Touch moves a block to the most recent end; victims from the least recent.
std::unique_ptr<EvictionPolicy> NewLruPolicy();

// First in, first out: Touch changes nothing; victims in insertion order.
std::unique_ptr<EvictionPolicy> NewFifoPolicy();

// SIEVE (Zhang et al., NSDI'24): a FIFO with one visited bit per block and a hand that moves from
// old to new, clearing visited bits, and evicts the first unvisited block; survivors are not moved.
std::unique_ptr<EvictionPolicy> NewSievePolicy();

// S3-FIFO (Yang et al., SOSP'23): small probationary FIFO (`small_fraction` of `capacity_blocks`),
// main FIFO with a 2-bit frequency, and a ghost FIFO of ghost keys as large as the main queue.
// Preconditions: capacity_blocks > 0, 0 < small_fraction < 1.
std::unique_ptr<EvictionPolicy> NewS3FifoPolicy(size_t capacity_blocks, double small_fraction);

// ARC (Megiddo & Modha, FAST'03): T1 (seen once), T2 (seen again), ghost lists B1/B2 and an
// adaptive target p for |T1|, with c = `capacity_blocks`. Precondition: capacity_blocks > 0.
std::unique_ptr<EvictionPolicy> NewArcPolicy(size_t capacity_blocks);

}  // namespace kvtier
