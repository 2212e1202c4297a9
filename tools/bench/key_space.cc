#include "tools/bench/key_space.h"

#include <fmt/format.h>

#include "common/mix.h"

namespace kvtier::bench {
namespace {

// SplitMix64's step (the golden-ratio increment, then the shared finaliser): a bijection on 64
// bits. Bench keys depend on it: --seed N names the same keys as before.
uint64_t Mix(uint64_t x) { return SplitMix64Finalize(x + 0x9e3779b97f4a7c15ull); }

}  // namespace

absl::StatusOr<KeyDist> ParseKeyDist(const std::string& name) {
  if (name == "uniform") return KeyDist::kUniform;
  if (name == "zipf") return KeyDist::kZipf;
  if (name == "sequential") return KeyDist::kSequential;
  return absl::InvalidArgumentError(
      fmt::format("unknown key distribution '{}' (uniform, zipf, sequential)", name));
}

std::string KeyDistName(KeyDist dist) {
  switch (dist) {
    case KeyDist::kUniform:
      return "uniform";
    case KeyDist::kZipf:
      return "zipf";
    case KeyDist::kSequential:
      return "sequential";
  }
  return "?";
}

BlockKey BenchKey(uint64_t seed, uint64_t sequence, uint32_t index) {
  const uint64_t chain = Mix(seed ^ Mix(sequence));
  return BlockKey{Mix(chain + index), chain ^ Mix(index)};
}

void ChainKeys(uint64_t seed, uint64_t sequence, uint32_t n, std::vector<BlockKey>* out) {
  out->resize(n);
  for (uint32_t i = 0; i < n; ++i) (*out)[i] = BenchKey(seed, sequence, i);
}

SequencePicker::SequencePicker(const KeySpace& space,
                               std::shared_ptr<const synth::ZipfSampler> zipf, uint32_t worker,
                               uint32_t workers)
    : space_(space),
      zipf_(std::move(zipf)),
      rng_(Mix(space.seed) ^ Mix(worker + 1)),
      next_(worker),
      stride_(workers) {}

uint64_t SequencePicker::Next() {
  switch (space_.dist) {
    case KeyDist::kUniform:
      return rng_.Below(space_.sequences);
    case KeyDist::kZipf:
      return zipf_->Sample(rng_);
    case KeyDist::kSequential: {
      const uint64_t s = next_ % space_.sequences;
      next_ += stride_;
      return s;
    }
  }
  return 0;
}

std::shared_ptr<const synth::ZipfSampler> SequencePicker::MakeZipf(const KeySpace& space) {
  if (space.dist != KeyDist::kZipf) return nullptr;
  return std::make_shared<const synth::ZipfSampler>(space.sequences, space.zipf_skew);
}

}  // namespace kvtier::bench
