// AcceptBackoff (daemon/accept_backoff.h): the waits grow and are bounded, one log line per
// interval carries the count, and the first accept that works says how many failed and resets.
#include "daemon/accept_backoff.h"

#include <gtest/gtest.h>

#include "absl/strings/match.h"

namespace kvtier {
namespace {

using std::chrono::milliseconds;
using Clock = AcceptBackoff::Clock;

TEST(AcceptBackoffTest, WaitsGrowToTheCeilingAndLogOncePerInterval) {
  AcceptBackoff b;
  Clock::time_point now{};
  std::string line;
  EXPECT_EQ(b.Failed(now, "Too many open files", &line), AcceptBackoff::kFirstWait);
  EXPECT_TRUE(absl::StrContains(line, "accept failed: Too many open files")) << line;
  std::vector<milliseconds> waits;
  int lines = 0;
  // 60 s of failures, each retried after the wait asked for.
  for (int i = 0; now < Clock::time_point{} + std::chrono::seconds(60); ++i) {
    const milliseconds wait = b.Failed(now, "Too many open files", &line);
    waits.push_back(wait);
    if (!line.empty()) ++lines;
    now += wait;
  }
  EXPECT_EQ(waits[0], milliseconds(20));
  EXPECT_EQ(waits[1], milliseconds(40));
  EXPECT_EQ(waits.back(), AcceptBackoff::kMostWait);
  EXPECT_LE(waits.size(), 610u);  // about 10 tries a second, not millions
  EXPECT_GE(lines, 5);
  EXPECT_LE(lines, 6);  // one per 10 s
  EXPECT_EQ(b.failures(), waits.size() + 1);

  const std::string back = b.Succeeded(now);
  EXPECT_TRUE(absl::StrContains(
      back, "accepting again after " + std::to_string(waits.size() + 1) + " failed accepts"))
      << back;
  EXPECT_EQ(b.failures(), 0u);
  EXPECT_EQ(b.Succeeded(now), "");  // nothing to say when nothing failed
  EXPECT_EQ(b.Failed(now, "again", &line), AcceptBackoff::kFirstWait);
  EXPECT_FALSE(line.empty());
}

TEST(AcceptBackoffTest, ALaterLineCountsTheFailuresSinceTheLastOne) {
  AcceptBackoff b;
  Clock::time_point now{};
  std::string line;
  b.Failed(now, "e", &line);
  for (int i = 0; i < 5; ++i) {
    now += milliseconds(100);
    b.Failed(now, "e", &line);
    EXPECT_EQ(line, "");
  }
  now += AcceptBackoff::kLogInterval;
  b.Failed(now, "Too many open files", &line);
  EXPECT_TRUE(absl::StrContains(line, "accept failed 6 more times")) << line;
  EXPECT_TRUE(absl::StrContains(line, "Too many open files")) << line;
}

}  // namespace
}  // namespace kvtier
