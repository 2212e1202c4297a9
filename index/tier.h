// Tiers: the rungs of the ladder (DESIGN.md "Tiers"), fastest first. One definition shared by the
// block index, the tiers, the mover, replay and the wire format (client/protocol), which sends tier
// numbers and tier masks as these values.
//
// The daemon runs up to four: T0 GPU HBM, T1 pinned host DRAM, T2 NVMe, and T3, the remote tier
// (a Redis-protocol store shared by the daemons of a fleet, tiers/remote/). A mask has room for
// kMaxTiers, so a simulated stack in `kvtier replay` (up to kMaxTiers rungs) needs no new type.
// The block index keeps a slot for each of the kSlotTiers; T3 is key-addressed (a block's place
// in the store is its key), so its copies have a tier bit and no slot.
#pragma once

#include <array>
#include <cstdint>
#include <string_view>

namespace kvtier {

// GPU HBM, pinned host DRAM, NVMe, remote store.
enum class Tier : uint8_t { kT0 = 0, kT1 = 1, kT2 = 2, kT3 = 3 };
// Tiers a daemon can run (a bit each in every block index entry).
inline constexpr int kNumTiers = 4;
// Tiers whose copies live in slots (T0-T2): the block index keeps a slot for each of these only.
inline constexpr int kSlotTiers = 3;
// Rungs a TierMask can name (bit t for rung t).
inline constexpr int kMaxTiers = 8;

// Set of tiers: bit t is set when the block is present in Tier t.
using TierMask = uint8_t;
constexpr TierMask TierBit(Tier tier) {
  return static_cast<TierMask>(1u << static_cast<int>(tier));
}
constexpr int TierIndex(Tier tier) { return static_cast<int>(tier); }
// Precondition: 0 <= index < kNumTiers.
constexpr Tier TierAt(int index) { return static_cast<Tier>(index); }

// "T0" ... "T7"; "T?" for anything else.
constexpr std::string_view TierName(Tier tier) {
  constexpr std::array<std::string_view, kMaxTiers> kNames = {"T0", "T1", "T2", "T3",
                                                              "T4", "T5", "T6", "T7"};
  return TierIndex(tier) < kMaxTiers ? kNames[static_cast<size_t>(TierIndex(tier))] : "T?";
}

}  // namespace kvtier
