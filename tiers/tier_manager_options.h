// Configuration of the tier manager (tier_manager.h): the tiers it builds and, per tier, how blocks
// leave it (DESIGN.md "Demotion and eviction"). Validated once, by TierManager::Create; every error
// names the setting, e.g. "t1.low_watermark: 0.97 is above t1.high_watermark (0.95)".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/status.h"
#include "index/admission_policy.h"
#include "index/block_index.h"
#include "index/eviction_policy.h"
#include "tiers/device_tier.h"
#include "tiers/host_tier.h"
#include "tiers/ladder.h"
#include "tiers/nvme_options.h"
#include "tiers/shared_tier.h"

namespace kvtier {

// A block move between tiers, as TierManagerOptions::on_move reports it.
enum class MoveKind : uint8_t {
  kPromotion,  // for a Get: T2 -> T1, T3 -> T1, T0 -> T1 (a T1 Get of a block whose only fast
               // copy is in T0), T1 -> T0 (a T0 Get)
  kDemotion,   // by the evictor: T1 -> T2 (a write to NVMe), T0 -> T1 (a copy back to host),
               // T2 -> T3 (or T1 -> T3 without a T2: a write to the remote store)
};
struct TierMove {
  MoveKind kind = MoveKind::kPromotion;
  Tier from = Tier::kT2;
  Tier to = Tier::kT1;
};

// Called once per block move whose read, write or copy succeeded, with how long it took in
// seconds: from the moment the manager issued it to its completion (steady clock), before the
// manager records the result (a result then discarded, e.g. for a block dropped meanwhile, still
// counts: the transfer happened). Failed moves are not reported; TierManagerStats counts them.
// Runs on the thread completing the transfer (T2's completion thread, T0's copy thread, or the
// issuing thread when the tier completes at once), holding none of the manager's locks; it must
// be cheap and must not block, since the move's waiting Gets are answered only after it returns.
// It must stay callable until the TierManager is destroyed (moves in flight finish then).
using TierMoveObserver = std::function<void(const TierMove& move, double seconds)>;

struct TierManagerOptions {
  BlockIndexOptions index;  // max_entries 0: sized from the tiers' slot counts
  // No value: no GPU tier (the CPU variant, or a daemon without a GPU). slot_bytes must equal
  // t1.slot_bytes so one T0 slot moves to one T1 slot with one DMA.
  std::optional<DeviceTierOptions> t0;
  TierPolicyOptions t0_policy;
  HostTierOptions t1;
  TierPolicyOptions t1_policy;
  // No value: the daemon runs without an NVMe tier (T1 victims are dropped).
  // registered_ranges is filled in by the manager with the T1 segment; slot_bytes must equal
  // t1.slot_bytes so one T1 slot moves to one T2 slot with one DMA.
  std::optional<NvmeTierOptions> t2;
  TierPolicyOptions t2_policy;
  // Null: no remote tier. Else T3, the ladder's last rung: a store shared by the daemons of a
  // fleet (shared_tier.h; the daemon opens a RemoteTier, tiers/remote/remote_tier.h). T2's victims
  // (T1's when there is no T2) are written to it through t3_policy's admission; a read of a block
  // found only there promotes it straight into T1. Its slot_bytes must equal t1.slot_bytes.
  std::shared_ptr<SharedTier> t3;
  TierPolicyOptions t3_policy;
  // Demotions in flight at once, per pair of tiers (T1 -> T2 writes, T0 -> T1 copies); more
  // victims wait for a completion. > 0.
  uint32_t max_demotions_in_flight = 64;
  // Write-through from T0: a block born in T0 (a GPU engine's published block) is copied to T1 in
  // the background as soon as T1 has a free slot, and keeps its T0 copy. T0 then evicts it without
  // a copy when room is needed, so a promotion into a full T0 (a T1 hit) never waits for a T0 ->
  // T1 demotion. Costs device -> host PCIe traffic at the rate blocks are born and a T1 slot per
  // copy (T1 evicts for it as for any block). Off in settle_each_move mode (replay has no such
  // moves). At most max_demotions_in_flight such copies at once.
  bool t0_write_through = true;
  // Replay-exact mode: the evictor sheds only while a Quiesce (or FlushT1) waits for it, counts
  // occupancy as the ladder does, starts one move at a time and looks at the rungs again only
  // once it has landed, so shedding follows exactly the sequence `kvtier replay` simulates
  // (tiers/ladder.h). With a client that waits for each operation to settle, the daemon then
  // places every block as replay does (tests/tiers/ladder_differential_test.cc). Costs throughput
  // (moves do not overlap); for validating a replay against a real daemon, not for serving.
  bool settle_each_move = false;
  // Empty: moves are not reported. The daemon feeds its transfer latency histograms from here.
  TierMoveObserver on_move;

  // OK, or an error naming the setting (the tiers' own Validate() messages included).
  absl::Status Validate() const;
};

}  // namespace kvtier
