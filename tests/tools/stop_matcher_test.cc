// StopMatcher (tools/serve/stop_matcher.h): the text is cut before the first stop string however
// the pieces split it, and nothing that could still become a stop string is emitted early.
#include "tools/serve/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace kvtier::serve {
namespace {

// Feeds `pieces`, returns everything emitted (Flush included unless stopped).
std::string Feed(std::vector<std::string> stops, const std::vector<std::string>& pieces,
                 bool* stopped = nullptr) {
  StopMatcher m(std::move(stops));
  std::string out;
  for (const std::string& p : pieces) out += m.Push(p);
  out += m.Flush();
  if (stopped != nullptr) *stopped = m.stopped();
  return out;
}

TEST(StopMatcherTest, StopSplitOverThreePiecesIsCutAndNotEmitted) {
  bool stopped = false;
  EXPECT_EQ(Feed({"END"}, {"abc E", "N", "D tail"}, &stopped), "abc ");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcherTest, HeldTextThatDoesNotBecomeAStopIsEmittedLater) {
  StopMatcher m({"END"});
  EXPECT_EQ(m.Push("abc EN"), "abc ");  // "EN" may still become "END"
  EXPECT_EQ(m.Push("x"), "ENx");
  EXPECT_EQ(m.Push("E"), "");
  EXPECT_EQ(m.Flush(), "E");
  EXPECT_FALSE(m.stopped());
}

TEST(StopMatcherTest, EarliestOfSeveralStopsWins) {
  EXPECT_EQ(Feed({"world", "lo w"}, {"hello", " world"}), "hel");
}

TEST(StopMatcherTest, OverlappingPrefixIsFound) {
  // "aab": after "aa" the partial match restarts inside the held text.
  EXPECT_EQ(Feed({"ab"}, {"x", "a", "a", "b", "c"}), "xa");
}

TEST(StopMatcherTest, NoStopsPassesTextThrough) {
  StopMatcher m({});
  EXPECT_EQ(m.Push("anything"), "anything");
  EXPECT_EQ(m.Flush(), "");
}

TEST(StopMatcherTest, NothingAfterAStop) {
  StopMatcher m({"\n\n"});
  EXPECT_EQ(m.Push("line\n"), "line");
  EXPECT_EQ(m.Push("\nmore"), "");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.Push("even more"), "");
  EXPECT_EQ(m.Flush(), "");
}

}  // namespace
}  // namespace kvtier::serve
