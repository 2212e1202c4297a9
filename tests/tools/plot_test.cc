#include "tools/replay/plot.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>

// fontconfig (which cairo's text drawing loads) keeps its configuration in caches it never frees;
// that is not our leak. LeakSanitizer reads this hook in the asan build and ignores it elsewhere.
extern "C" const char* __lsan_default_suppressions() { return "leak:libfontconfig.so\n"; }

namespace kvtier::replay {
namespace {

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// Miss-ratio-like curves: falling with capacity, one per policy.
PlotSpec MissRatioCurves() {
  PlotSpec spec;
  spec.title = "Miss ratio vs capacity (mooncake_conversation)";
  spec.x_label = "capacity (blocks)";
  spec.y_label = "miss ratio";
  spec.log_x = true;
  const char* names[] = {"lru", "fifo", "s3fifo+second", "opt"};
  for (int p = 0; p < 4; ++p) {
    PlotSeries s;
    s.label = names[p];
    for (double c = 1000; c <= 200000; c *= 1.7) {
      s.x.push_back(c);
      s.y.push_back(0.63 + (0.99 - 0.63) * std::exp(-c / (8000.0 * (p + 1))) - 0.01 * p);
    }
    spec.series.push_back(s);
  }
  return spec;
}

void ExpectPng(const std::string& path) {
  std::string bytes = ReadFile(path);
  ASSERT_GE(bytes.size(), 8u);
  EXPECT_EQ(bytes.substr(0, 8), std::string("\x89PNG\r\n\x1a\n", 8));
  EXPECT_GT(bytes.size(), 15000u) << "a plot with axes, text and four series is not this small";
}

TEST(PlotTest, WritesALogXPngWithSeveralSeries) {
  std::string path = std::string(KVTIER_BINARY_DIR) + "/plot_test_log.png";
  absl::Status status = WritePlotPng(MissRatioCurves(), path);
  ASSERT_TRUE(status.ok()) << status;
  ExpectPng(path);
}

TEST(PlotTest, WritesALinearPng) {
  PlotSpec spec;
  spec.title = "linear";
  spec.x_label = "x";
  spec.y_label = "y";
  spec.series.push_back({"one", {0, 1, 2, 3, 4, 5}, {0.1, 0.4, 0.2, 0.5, 0.45, 0.3}});
  spec.series.push_back({"two", {0, 2.5, 5}, {0.3, 0.3, 0.35}});
  std::string path = std::string(KVTIER_BINARY_DIR) + "/plot_test_linear.png";
  absl::Status status = WritePlotPng(spec, path);
  ASSERT_TRUE(status.ok()) << status;
  ExpectPng(path);
}

TEST(PlotTest, RejectsEmptyAndInconsistentSpecs) {
  std::string path = ::testing::TempDir() + std::to_string(::getpid()) + "plot_test_bad.png";
  PlotSpec spec;
  EXPECT_EQ(WritePlotPng(spec, path).message(), "plot has no series");
  spec.series.push_back({"a", {1, 2}, {1}});
  EXPECT_EQ(WritePlotPng(spec, path).message(), "plot series \"a\" has 2 x and 1 y values");
  spec.series[0] = {"b", {0, 2}, {1, 1}};
  spec.log_x = true;
  EXPECT_EQ(WritePlotPng(spec, path).message(),
            "plot series \"b\" point 0 (0, 1) cannot be drawn on a log x axis");
  spec.log_x = false;
  spec.series[0] = {"c", {1, 2}, {1, NAN}};
  EXPECT_EQ(WritePlotPng(spec, path).code(), absl::StatusCode::kInvalidArgument);
}

TEST(PlotTest, ASingleFlatPointStillDraws) {
  PlotSpec spec;
  spec.series.push_back({"only", {5}, {0.5}});
  EXPECT_TRUE(
      WritePlotPng(spec, ::testing::TempDir() + std::to_string(::getpid()) + "plot_test_point.png")
          .ok());
}

TEST(PlotTest, UnwritablePathIsAnInternalErrorNamingIt) {
  absl::Status status = WritePlotPng(MissRatioCurves(), "/nonexistent-dir/plot.png");
  EXPECT_EQ(status.code(), absl::StatusCode::kInternal);
  EXPECT_NE(status.message().find("/nonexistent-dir/plot.png"), absl::string_view::npos);
}

}  // namespace
}  // namespace kvtier::replay
