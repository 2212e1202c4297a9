// The C ABI's working slots and slot addresses (kvtier_client_c.h "working slots") over
// client::Client and client::GpuClient.
#include <fmt/format.h>

#include <cstring>
#include <optional>
#include <vector>

#include "client/kvtier_client_c_internal.h"

namespace {

using kvtier::client::c_abi::Check;
using kvtier::client::c_abi::Fail;
using kvtier::protocol::BlockCode;

// The tier of a working-slot call (the C++ client checks it further: T0 only with a T0).
absl::StatusOr<kvtier::Tier> TierArg(uint32_t tier) {
  if (tier == KVTIER_TIER_T0 || tier == KVTIER_TIER_T1) return static_cast<kvtier::Tier>(tier);
  return absl::InvalidArgumentError(fmt::format(
      "tier is {}; working slots are of KVTIER_TIER_T0 (0) or KVTIER_TIER_T1 (1)", tier));
}

absl::StatusOr<std::vector<kvtier::protocol::WorkPublishItem>> ItemsArg(const kvtier_work_item* in,
                                                                        size_t n) {
  if (n > 0 && in == nullptr) {
    return absl::InvalidArgumentError(fmt::format("items is NULL but n is {}", n));
  }
  std::vector<kvtier::protocol::WorkPublishItem> items(n);
  for (size_t i = 0; i < n; ++i) {
    if (in[i].has_parent > 1 || in[i].reserved != 0) {
      return absl::InvalidArgumentError(
          fmt::format("items[{}]: has_parent is {} (0 or 1) and reserved {} (must be 0)", i,
                      in[i].has_parent, in[i].reserved));
    }
    const std::optional<kvtier::BlockKey> parent =
        in[i].has_parent ? std::optional(kvtier::BlockKey{in[i].parent.lo, in[i].parent.hi})
                         : std::nullopt;
    items[i] = {kvtier::BlockKey{in[i].key.lo, in[i].key.hi}, parent, in[i].checksum, in[i].slot,
                in[i].payload_bytes};
  }
  return items;
}

void CopyCodes(const std::vector<BlockCode>& in, uint32_t* out) {
  for (size_t i = 0; out != nullptr && i < in.size(); ++i) out[i] = static_cast<uint32_t>(in[i]);
}

}  // namespace

extern "C" {

int kvtier_work_take(kvtier_client* client, uint32_t tier, size_t n, kvtier_block_result* results) {
  if (int e = Check(client, "client"); e) return e;
  if (int e = Check(results, "results"); e) return e;
  auto t = TierArg(tier);
  if (!t.ok()) return Fail(t.status());
  auto taken = client->impl->TakeWorkingSlots(*t, n);
  if (!taken.ok()) return Fail(taken.status());
  static_assert(sizeof(kvtier_block_result) == sizeof(kvtier::protocol::BlockResult));
  std::memcpy(results, taken->data(), taken->size() * sizeof(kvtier_block_result));
  return 0;
}

int kvtier_work_publish(kvtier_client* client, uint32_t tier, const kvtier_work_item* items,
                        size_t n, uint32_t* codes) {
  if (int e = Check(client, "client"); e) return e;
  auto t = TierArg(tier);
  if (!t.ok()) return Fail(t.status());
  auto in = ItemsArg(items, n);
  if (!in.ok()) return Fail(in.status());
  auto done = client->impl->PublishWorking(*t, *in);
  if (!done.ok()) return Fail(done.status());
  CopyCodes(*done, codes);
  return 0;
}

int kvtier_work_free(kvtier_client* client, uint32_t tier, const uint32_t* slots, size_t n,
                     uint32_t* codes) {
  if (int e = Check(client, "client"); e) return e;
  auto t = TierArg(tier);
  if (!t.ok()) return Fail(t.status());
  if (n > 0 && slots == nullptr) {
    return Fail(absl::InvalidArgumentError(fmt::format("slots is NULL but n is {}", n)));
  }
  auto done = client->impl->FreeWorking(*t, {slots, n});
  if (!done.ok()) return Fail(done.status());
  CopyCodes(*done, codes);
  return 0;
}

void* kvtier_mutable_slot_data(kvtier_client* client, uint32_t slot) {
  return client != nullptr ? client->impl->MutableSlotData(slot) : nullptr;
}

uint32_t kvtier_t0_slots(const kvtier_client* client) {
  if (client == nullptr) return 0;
  const std::optional<kvtier::client::T0Info> t0 = client->impl->t0();
  return t0 ? t0->slots : 0;
}

void* kvtier_gpu_t0_slot(const kvtier_gpu* gpu, uint32_t slot) {
  return gpu != nullptr ? gpu->impl->T0SlotData(slot) : nullptr;
}

}  // extern "C"
