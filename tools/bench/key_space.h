// Which keys `kvtier bench` asks for. The key space is `sequences` chains of blocks; an op on
// sequence s with k keys uses the first k blocks of chain s (a prefix, as an engine would look one
// up). Distributions pick the sequence:
//
//   uniform     every sequence equally likely;
//   zipf        sequence of rank r with probability ~ 1 / (r + 1)^skew (skew 0 is uniform);
//   sequential  worker w of W takes w, w + W, w + 2W, ... (wrapping at `sequences`): a scan, and
//               with a large key space a stream of fresh keys (put bandwidth).
//
// Keys are derived from (run seed, sequence, block index) by a 64-bit mixer, not from tokens:
// cheap enough not to show in a lookup round trip, and a new --seed gives keys no earlier run
// stored. The daemon scopes keys to the client's namespace, so any 128-bit value is a valid key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/status.h"
#include "index/block_key.h"
#include "tools/synth/synth_random.h"

namespace kvtier::bench {

enum class KeyDist { kUniform, kZipf, kSequential };

// "uniform", "zipf", "sequential"; InvalidArgument otherwise.
absl::StatusOr<KeyDist> ParseKeyDist(const std::string& name);
std::string KeyDistName(KeyDist dist);

struct KeySpace {
  KeyDist dist = KeyDist::kUniform;
  uint64_t sequences = 100000;
  double zipf_skew = 0.99;
  uint64_t seed = 1;
};

// Key `index` (0-based) of chain `sequence`; its parent is BenchKey(seed, sequence, index - 1).
BlockKey BenchKey(uint64_t seed, uint64_t sequence, uint32_t index);
// The first `n` keys of chain `sequence` into *out (resized to n).
void ChainKeys(uint64_t seed, uint64_t sequence, uint32_t n, std::vector<BlockKey>* out);

// Picks sequences for one worker thread. The zipf table (8 bytes per sequence) is built once and
// shared read-only between pickers. Not thread-safe: one picker per thread.
class SequencePicker {
 public:
  // worker < workers; each worker draws from its own random stream.
  SequencePicker(const KeySpace& space, std::shared_ptr<const synth::ZipfSampler> zipf,
                 uint32_t worker, uint32_t workers);
  uint64_t Next();

  // The zipf table for `space`, or null when the distribution needs none.
  static std::shared_ptr<const synth::ZipfSampler> MakeZipf(const KeySpace& space);

 private:
  KeySpace space_;
  std::shared_ptr<const synth::ZipfSampler> zipf_;
  synth::Rng rng_;
  uint64_t next_;
  uint64_t stride_;
};

}  // namespace kvtier::bench
