// Client's working slots (kvtier_client.h "Working slots"; docs/protocol.md "Working slots"):
// work_take, work_publish and work_free, each one request of at most max_batch items.
#include <fmt/format.h>

#include "client/client_impl.h"
#include "client/kvtier_client.h"

namespace kvtier::client {
namespace {

using protocol::BlockCode;
using protocol::BlockResult;
using protocol::Op;

std::vector<BlockCode> CodesOf(const std::vector<BlockResult>& results) {
  std::vector<BlockCode> codes(results.size());
  for (size_t i = 0; i < results.size(); ++i) codes[i] = static_cast<BlockCode>(results[i].code);
  return codes;
}

}  // namespace

absl::Status Client::CheckSlotTier(const char* what, Tier tier) const {
  if (tier == Tier::kT1 || (tier == Tier::kT0 && impl_->welcome.t0_bytes != 0)) {
    return absl::OkStatus();
  }
  if (tier == Tier::kT0) {
    return absl::InvalidArgumentError(
        fmt::format("{}: tier T0, but kvtierd has no T0 (its Welcome says so)", what));
  }
  return absl::InvalidArgumentError(fmt::format("{}: tier {} ({}); slots are of T0 or T1", what,
                                                static_cast<int>(tier), TierName(tier)));
}

absl::Status Client::CheckBatch(const char* what, size_t count) const {
  const uint32_t max = impl_->welcome.max_batch;
  if (count != 0 && count <= max) return absl::OkStatus();
  return absl::InvalidArgumentError(
      fmt::format("{} is {}; one request takes 1 to {} (max_batch)", what, count, max));
}

absl::StatusOr<std::vector<BlockResult>> Client::TakeWorkingSlots(Tier tier, size_t n) {
  KVTIER_RETURN_IF_ERROR(CheckSlotTier("TakeWorkingSlots", tier));
  KVTIER_RETURN_IF_ERROR(CheckBatch("TakeWorkingSlots: n", n));
  absl::MutexLock lock(&impl_->mu);
  return impl_->DoBlockResults({Op::kWorkTake, n, static_cast<uint8_t>(tier), nullptr});
}

absl::StatusOr<std::vector<BlockCode>> Client::PublishWorking(
    Tier tier, absl::Span<const protocol::WorkPublishItem> items) {
  KVTIER_RETURN_IF_ERROR(CheckSlotTier("PublishWorking", tier));
  if (items.empty()) return std::vector<BlockCode>();
  KVTIER_RETURN_IF_ERROR(CheckBatch("PublishWorking: items.size()", items.size()));
  for (size_t i = 0; i < items.size(); ++i) {
    KVTIER_RETURN_IF_ERROR(CheckPayloadBytes("PublishWorking: items", i, ".payload_bytes",
                                             items[i].payload_bytes, tier));
  }
  absl::MutexLock lock(&impl_->mu);
  KVTIER_ASSIGN_OR_RETURN(
      std::vector<BlockResult> done,
      impl_->DoBlockResults({Op::kWorkPublish, items.size(), static_cast<uint8_t>(tier),
                             [&](protocol::ArenaView a, protocol::ArenaRange r) {
                               protocol::WriteWorkPublish(a, r, items);
                             }}));
  return CodesOf(done);
}

absl::StatusOr<std::vector<BlockCode>> Client::FreeWorking(Tier tier,
                                                           absl::Span<const uint32_t> slots) {
  KVTIER_RETURN_IF_ERROR(CheckSlotTier("FreeWorking", tier));
  if (slots.empty()) return std::vector<BlockCode>();
  KVTIER_RETURN_IF_ERROR(CheckBatch("FreeWorking: slots.size()", slots.size()));
  absl::MutexLock lock(&impl_->mu);
  KVTIER_ASSIGN_OR_RETURN(
      std::vector<BlockResult> done,
      impl_->DoBlockResults({Op::kWorkFree, slots.size(), static_cast<uint8_t>(tier),
                             [&](protocol::ArenaView a, protocol::ArenaRange r) {
                               protocol::WriteWorkSlots(a, r, slots);
                             }}));
  return CodesOf(done);
}

}  // namespace kvtier::client
