#include "tiers/tier_manager_options.h"

#include <fmt/format.h>

#include <string>

namespace kvtier {
absl::Status TierManagerOptions::Validate() const {
  KVTIER_RETURN_IF_ERROR(t1.Validate());
  KVTIER_RETURN_IF_ERROR(t1_policy.Validate("t1"));
  if (t1_policy.admission.policy != "all") {
    // The ladder gates births by the tier's admission (tiers/ladder.h); the daemon cannot yet tell
    // a client its put was not admitted, so T1, where puts are born, admits all.
    return absl::InvalidArgumentError(fmt::format(
        "t1.admission.policy: '{}' is not supported: T1 is where puts are stored, and a put is "
        "never refused (use t2.admission to choose what is written to NVMe)",
        t1_policy.admission.policy));
  }
  if (max_demotions_in_flight == 0) {
    return absl::InvalidArgumentError("max_demotions_in_flight: must be > 0");
  }
  KVTIER_RETURN_IF_ERROR(t0_policy.Validate("t0"));  // also without T0, as for T2 below
  if (t0.has_value()) {
    KVTIER_RETURN_IF_ERROR(t0->Validate());
    if (t0->slot_bytes != t1.slot_bytes) {
      return absl::InvalidArgumentError(
          fmt::format("t0.slot_bytes: {} differs from t1.slot_bytes ({}); one T0 slot moves to "
                      "one T1 slot",
                      t0->slot_bytes, t1.slot_bytes));
    }
  }
  KVTIER_RETURN_IF_ERROR(t3_policy.Validate("remote"));
  if (t3 != nullptr && t3->slot_bytes() != t1.slot_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("remote: the remote tier's slot size {} differs from t1.slot_bytes ({})",
                    t3->slot_bytes(), t1.slot_bytes));
  }
  KVTIER_RETURN_IF_ERROR(t2_policy.Validate("t2"));  // also without T2: a bad value is a bad file
  if (!t2.has_value()) return absl::OkStatus();
  if (t2->slot_bytes != t1.slot_bytes) {
    return absl::InvalidArgumentError(
        fmt::format("t2.slot_bytes: {} differs from t1.slot_bytes ({}); one T1 slot moves to one "
                    "T2 slot",
                    t2->slot_bytes, t1.slot_bytes));
  }
  return t2->Validate();
}

}  // namespace kvtier
