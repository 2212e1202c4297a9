#include "tools/common/progress.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

namespace kvtier {
namespace {

// Points stderr (fd 2) at a regular file for the life of the object: not a terminal, and readable.
class StderrToFile {
 public:
  StderrToFile()
      : path_(::testing::TempDir() + "progress_test_stderr_" + std::to_string(::getpid())) {
    std::fflush(stderr);
    saved_ = dup(STDERR_FILENO);
    int fd = open(path_.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    dup2(fd, STDERR_FILENO);
    close(fd);
  }
  ~StderrToFile() { Restore(); }
  // Restores stderr and returns what was written to it.
  std::string Restore() {
    if (saved_ >= 0) {
      std::fflush(stderr);
      dup2(saved_, STDERR_FILENO);
      close(saved_);
      saved_ = -1;
    }
    std::ifstream in(path_);
    std::stringstream text;
    text << in.rdbuf();
    return text.str();
  }

 private:
  std::string path_;
  int saved_ = -1;
};

TEST(ProgressBarTest, SilentWhenStderrIsNotATerminal) {
  StderrToFile capture;
  {
    ProgressBar bar("replay");
    EXPECT_FALSE(bar.enabled());
    for (uint64_t i = 0; i <= 100; ++i) bar.Update(i, 100);
  }
  EXPECT_EQ(capture.Restore(), "");
}

TEST(ProgressBarTest, ForcedBarDrawsLabelPercentAndFinishesTheLine) {
  StderrToFile capture;
  {
    ProgressBar bar("replay", /*force=*/true);
    EXPECT_TRUE(bar.enabled());
    bar.Update(50, 200);
  }
  std::string out = capture.Restore();
  EXPECT_NE(out.find("replay ["), std::string::npos) << out;
  EXPECT_NE(out.find(" 25.0% 50/200"), std::string::npos) << out;
  EXPECT_EQ(out.back(), '\n');
}

TEST(ProgressBarTest, RedrawsAtMostTenTimesASecondAndShowsTheLastStateAtTheEnd) {
  StderrToFile capture;
  auto start = std::chrono::steady_clock::now();
  {
    ProgressBar bar("sweep", /*force=*/true);
    for (uint64_t i = 1; i <= 300000; ++i) bar.Update(i, 300000);
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::string out = capture.Restore();
  long redraws = std::count(out.begin(), out.end(), '\r');
  EXPECT_LE(redraws, 2 + static_cast<long>(seconds * 10)) << seconds << " s";
  EXPECT_NE(out.find("100.0% 300.0k/300.0k\x1b[K\n"), std::string::npos) << out;
}

TEST(ProgressBarTest, UnknownTotalDrawsASpinnerAndCount) {
  StderrToFile capture;
  {
    ProgressBar bar("load", /*force=*/true);
    bar.Update(123456, 0);
  }
  std::string out = capture.Restore();
  EXPECT_NE(out.find("123.5k"), std::string::npos) << out;
  EXPECT_EQ(out.find('%'), std::string::npos) << out;
}

TEST(ProgressBarTest, NothingDrawnMeansNothingWritten) {
  StderrToFile capture;
  { ProgressBar bar("idle", /*force=*/true); }
  EXPECT_EQ(capture.Restore(), "");
}

}  // namespace
}  // namespace kvtier
