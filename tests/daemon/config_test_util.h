// Helpers for the config tests: config files written to a fresh temporary directory.
#pragma once

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "daemon/config.h"

namespace kvtier::testing {

// A fresh directory under the test's temporary directory, removed with its contents.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = ::testing::TempDir() + "/kvtier-config-XXXXXX";
    path_ = ::mkdtemp(tmpl.data()) != nullptr ? tmpl : std::string();
  }
  ~TempDir() {
    std::error_code ec;
    if (!path_.empty()) std::filesystem::remove_all(path_, ec);
  }
  const std::string& path() const { return path_; }

  // Writes `text` to `name` in this directory; returns its path.
  std::string Write(const std::string& name, const std::string& text) const {
    const std::string file = path_ + "/" + name;
    std::ofstream(file) << text;
    return file;
  }

 private:
  std::string path_;
};

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// LoadConfig of `text` written to x.toml; the error message, or "" when it loaded.
inline std::string LoadError(const TempDir& dir, const std::string& text,
                             const std::vector<ConfigOverride>& overrides = {}) {
  const absl::StatusOr<DaemonConfig> config = LoadConfig(dir.Write("x.toml", text), overrides);
  return config.ok() ? std::string() : std::string(config.status().message());
}

}  // namespace kvtier::testing
