// Admission policies: "all", and "second", a doorkeeper in the manner of TinyLFU's (Einziger et
// al.): the first attempt to write a key is only remembered; a second attempt within the window
// admits.
//
// The memory of "second" is two Bloom filters, the current and the previous generation, each sized
// for half the window. An attempt is recorded in the current one; when it has taken half a window
// of new keys, the previous one is dropped, the current one becomes the previous and a cleared
// filter takes its place. So a recorded key is remembered for at least window/2 and at most
// `window` later recorded keys, and memory is fixed at about 1.5 bytes per window block (12 bits
// per key) instead of a hash set's ~20: it matters for an NVMe tier of tens of millions of blocks.
// The price is a small false-positive rate (~1%) that admits some first attempts; a false negative
// cannot happen. Hashing is a fixed mixer, never a per-process seed, so replays are reproducible.
#include "index/admission_policy.h"

#include <algorithm>
#include <array>
#include <string>
#include <utility>
#include <vector>

#include "common/mix.h"

namespace kvtier {
namespace {

constexpr std::string_view kNames = "all, second";
constexpr size_t kMaxWindowBlocks = size_t{1} << 32;

// Spreads sequential trace ids over all 64 bits.
uint64_t Mix(uint64_t x) { return SplitMix64Finalize(x); }

// A blocked Bloom filter: each key sets kProbes bits inside one 512-bit (cache-line) block, so a
// query is one cache miss.
class BloomFilter {
 public:
  explicit BloomFilter(size_t expected_keys)
      : blocks_(std::max<size_t>(1, (expected_keys * kBitsPerKey + 511) / 512)) {}

  bool MayContain(uint64_t hash) const {
    const Block& b = blocks_[BlockOf(hash)];
    uint64_t probes = Mix(hash ^ kProbeSalt);
    for (int i = 0; i < kProbes; ++i, probes >>= 9) {
      const uint32_t bit = probes & 511;
      if (!(b.words[bit >> 6] & (uint64_t{1} << (bit & 63)))) return false;
    }
    return true;
  }

  void Add(uint64_t hash) {
    Block& b = blocks_[BlockOf(hash)];
    uint64_t probes = Mix(hash ^ kProbeSalt);
    for (int i = 0; i < kProbes; ++i, probes >>= 9) {
      const uint32_t bit = probes & 511;
      b.words[bit >> 6] |= uint64_t{1} << (bit & 63);
    }
  }

  void Clear() { std::fill(blocks_.begin(), blocks_.end(), Block{}); }

 private:
  static constexpr size_t kBitsPerKey = 12;
  static constexpr int kProbes = 7;  // 7 x 9 bits of one 64-bit hash
  static constexpr uint64_t kProbeSalt = 0x2545f4914f6cdd1dull;
  struct alignas(64) Block {
    std::array<uint64_t, 8> words{};
  };

  // Maps the high 32 bits of `hash` onto [0, blocks) without a division (Lemire's fastrange).
  size_t BlockOf(uint64_t hash) const { return ((hash >> 32) * blocks_.size()) >> 32; }

  std::vector<Block> blocks_;
};

class AdmitAll final : public AdmissionPolicy {
 public:
  bool Admit(uint64_t /*ghost_key*/) override { return true; }
  std::string_view Name() const override { return "all"; }
};

class AdmitSecond final : public AdmissionPolicy {
 public:
  explicit AdmitSecond(size_t window_blocks)
      : generation_keys_((window_blocks + 1) / 2),
        current_(generation_keys_),
        previous_(generation_keys_) {}

  bool Admit(uint64_t ghost_key) override {
    const uint64_t hash = Mix(ghost_key);
    if (current_.MayContain(hash)) return true;
    const bool seen = previous_.MayContain(hash);
    // Recorded again in the current generation so a key in use outlives the next rotation.
    current_.Add(hash);
    if (++current_keys_ == generation_keys_) Rotate();
    return seen;
  }

  std::string_view Name() const override { return "second"; }

 private:
  void Rotate() {
    std::swap(current_, previous_);
    current_.Clear();
    current_keys_ = 0;
  }

  const size_t generation_keys_;  // keys per generation: half the window, rounded up
  size_t current_keys_ = 0;       // keys added to current_ since the last rotation
  BloomFilter current_;
  BloomFilter previous_;
};

}  // namespace

std::string_view AdmissionPolicyNames() { return kNames; }

absl::Status AdmissionConfig::Validate() const {
  if (policy != "all" && policy != "second") {
    return absl::InvalidArgumentError("admission.policy: unknown policy '" + policy +
                                      "' (expected " + std::string(kNames) + ")");
  }
  if (window_blocks == 0 || window_blocks > kMaxWindowBlocks) {
    return absl::InvalidArgumentError("admission.window_blocks: must be in [1, 2^32] (got " +
                                      std::to_string(window_blocks) + ")");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<AdmissionPolicy>> MakeAdmissionPolicy(
    const AdmissionConfig& config) {
  KVTIER_RETURN_IF_ERROR(config.Validate());
  if (config.policy == "all") return std::make_unique<AdmitAll>();
  return std::make_unique<AdmitSecond>(config.window_blocks);
}

}  // namespace kvtier
