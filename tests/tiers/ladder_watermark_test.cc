// The ladder's watermarks at their edges: a rung configured to shed only when full
// (high_watermark = low_watermark = 1.0) still sheds once it runs full, so a tier full of unleased
// blocks makes room (it stopped at once and never did: an engine on kvtierd hung).
#include <gtest/gtest.h>

#include "tiers/ladder.h"

namespace kvtier {
namespace {

TEST(LadderWatermarkTest, ARungFullAtLowWatermarkOneStillShedsABlock) {
  RungOptions rung;
  rung.name = "T1";
  rung.capacity_slots = 4;
  rung.policy.high_watermark = 1.0;
  rung.policy.low_watermark = 1.0;
  absl::StatusOr<std::unique_ptr<Ladder>> ladder = Ladder::Create({rung});
  ASSERT_TRUE(ladder.ok()) << ladder.status();
  EXPECT_FALSE((*ladder)->ShouldShed(0, 4)) << "full, but not above the high watermark";
  (*ladder)->MarkFull(0);  // an allocation found it full
  EXPECT_TRUE((*ladder)->ShouldShed(0, 4));
  EXPECT_FALSE((*ladder)->ShouldShed(0, 3)) << "one slot made free: done";
}

}  // namespace
}  // namespace kvtier
