// Admission policies: "all", and "second" (admit on the second attempt within a bounded window).
#include "index/admission_policy.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

namespace kvtier {
namespace {

std::unique_ptr<AdmissionPolicy> Make(const std::string& policy, size_t window) {
  AdmissionConfig config;
  config.policy = policy;
  config.window_blocks = window;
  auto made = MakeAdmissionPolicy(config);
  EXPECT_TRUE(made.ok()) << made.status();
  return std::move(made).value();
}

TEST(AdmissionPolicyTest, AllAdmitsEverything) {
  auto all = Make("all", 1);
  EXPECT_EQ(all->Name(), "all");
  for (uint64_t k = 0; k < 1000; ++k) EXPECT_TRUE(all->Admit(k));
}

TEST(AdmissionPolicyTest, SecondAdmitsOnSecondAttempt) {
  auto second = Make("second", 1000);
  EXPECT_EQ(second->Name(), "second");
  EXPECT_FALSE(second->Admit(42));
  EXPECT_TRUE(second->Admit(42));
  EXPECT_TRUE(second->Admit(42));
}

TEST(AdmissionPolicyTest, SecondRemembersForHalfAWindow) {
  // Window 1000: a key is remembered for at least 500 more recorded keys, here across a generation
  // change (at the 500th). Bloom filters give no false negatives.
  auto second = Make("second", 1000);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 200; ++k) {
    EXPECT_FALSE(second->Admit(k * 7919)) << k;  // may rarely be a false positive; not here
    keys.push_back(k * 7919);
  }
  for (uint64_t k = 0; k < 350; ++k) second->Admit(1'000'000 + k);
  for (uint64_t key : keys) EXPECT_TRUE(second->Admit(key)) << key;
}

TEST(AdmissionPolicyTest, SecondForgetsBeyondItsWindow) {
  // After `window` more recorded keys, the two generations holding the first attempts are gone.
  // Bloom filters may admit a few by false positive; far fewer than 5%.
  constexpr size_t kWindow = 1000;
  auto second = Make("second", kWindow);
  for (uint64_t k = 0; k < 200; ++k) second->Admit(k);
  for (uint64_t k = 0; k < kWindow; ++k) second->Admit(10'000'000 + k);
  int admitted = 0;
  for (uint64_t k = 0; k < 200; ++k) admitted += second->Admit(k);
  EXPECT_LE(admitted, 10);
}

TEST(AdmissionPolicyTest, SecondFalsePositiveRateIsSmallInSteadyState) {
  // Memory is fixed by the window: after many windows' worth of distinct keys, first attempts are
  // still rejected (filters are recycled, not filled up).
  auto second = Make("second", 1 << 12);
  std::mt19937_64 rng(5);
  int admitted = 0;
  constexpr int kKeys = 200'000;
  for (int i = 0; i < kKeys; ++i) admitted += second->Admit(rng());
  EXPECT_LT(admitted, kKeys / 50);  // < 2%
}

TEST(AdmissionConfigTest, ValidateNamesTheField) {
  AdmissionConfig config;
  EXPECT_TRUE(config.Validate().ok());
  EXPECT_EQ(AdmissionPolicyNames(), "all, second");
  config.policy = "third";
  EXPECT_EQ(config.Validate().message(),
            "admission.policy: unknown policy 'third' (expected all, second)");
  config.policy = "second";
  config.window_blocks = 0;
  EXPECT_EQ(config.Validate().message(), "admission.window_blocks: must be in [1, 2^32] (got 0)");
  EXPECT_EQ(MakeAdmissionPolicy(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.window_blocks = 1;
  EXPECT_TRUE(MakeAdmissionPolicy(config).ok());
}

}  // namespace
}  // namespace kvtier
