// Admission policies: whether a block may enter a tier at all (DESIGN.md "Demotion and eviction").
// A tier asks before it writes a block in (a new block, or a victim demoted from the tier above);
// a rejected block is not written, which saves the write bandwidth and the space for blocks that
// are referenced only once (75.8% of unique blocks in the bundled Mooncake trace).
//
// Thread-safety: none. A tier serialises calls to its admission policy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier {

class AdmissionPolicy {
 public:
  virtual ~AdmissionPolicy() = default;
  // Called once per attempt to write the block named `ghost_key` (see eviction_policy.h) into the
  // tier; true admits it. The call itself is recorded: a policy may admit on a later attempt.
  virtual bool Admit(uint64_t ghost_key) = 0;
  virtual std::string_view Name() const = 0;
};

struct AdmissionConfig {
  // "all": admit every block.
  // "second": admit a block on its second attempt within a bounded window (a doorkeeper filter of
  //   about `window_blocks` recent keys; older attempts are forgotten, so memory stays bounded).
  std::string policy = "all";
  size_t window_blocks = 1 << 16;  // > 0; typically the tier's capacity in blocks

  absl::Status Validate() const;
};

std::string_view AdmissionPolicyNames();  // "all, second"

absl::StatusOr<std::unique_ptr<AdmissionPolicy>> MakeAdmissionPolicy(const AdmissionConfig& config);

}  // namespace kvtier
