// common/log.h: client text escaped for log lines, and no message can write two lines.
#include "common/log.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <string>

namespace kvtier::log {
namespace {

TEST(EscapeForLogTest, PrintableAsciiStaysAndEverythingElseIsEscaped) {
  EXPECT_EQ(EscapeForLog("meta-llama/Llama-3.1-8B@abc 'x'"), "meta-llama/Llama-3.1-8B@abc 'x'");
  EXPECT_EQ(EscapeForLog("a\nerror [fake] b"), "a\\x0aerror [fake] b");
  EXPECT_EQ(EscapeForLog("\r\t\x1b[2J\x7f"), "\\x0d\\x09\\x1b[2J\\x7f");
  EXPECT_EQ(EscapeForLog(std::string("nul\0end", 7)), "nul\\x00end");
  EXPECT_EQ(EscapeForLog("caf\xc3\xa9 \xe2\x80\xa8"), "caf\\xc3\\xa9 \\xe2\\x80\\xa8");
  // Backslashes are doubled, so an escape a client typed never reads as one it did not.
  EXPECT_EQ(EscapeForLog("a\\x0ab"), "a\\\\x0ab");
  EXPECT_EQ(EscapeForLog(""), "");
}

// What Write puts on stderr while `body` runs.
std::string CaptureStderr(void (*body)()) {
  std::fflush(stderr);
  std::FILE* file = std::tmpfile();
  const int saved = ::dup(STDERR_FILENO);
  ::dup2(::fileno(file), STDERR_FILENO);
  body();
  std::fflush(stderr);
  ::dup2(saved, STDERR_FILENO);
  ::close(saved);
  std::string out;
  std::rewind(file);
  for (int c; (c = std::fgetc(file)) != EOF;) out += static_cast<char>(c);
  std::fclose(file);
  return out;
}

TEST(LogWriteTest, ControlBytesInAMessageNeverStartALine) {
  const std::string out = CaptureStderr([] {
    Write(Level::kWarn, "test", "one\nerror [fake] two\r\x1b");
    Write(Level::kWarn, "test", "plain \\ text");
  });
  EXPECT_NE(out.find(" warn [test] one\\x0aerror [fake] two\\x0d\\x1b\n"), std::string::npos)
      << out;
  EXPECT_NE(out.find(" warn [test] plain \\ text\n"), std::string::npos) << out;
  EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 2) << out;
}

}  // namespace
}  // namespace kvtier::log
