#include "tiers/nvme_options.h"

#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace kvtier {
namespace {

constexpr uint64_t kAlign = 4096;
constexpr uint64_t kMaxSlotBytes = uint64_t{1} << 30;

// The problems of one Validate, one a line; the status code is the first problem's.
class Problems {
 public:
  void Add(const absl::Status& status) {
    if (status.ok()) return;
    if (lines_.empty()) code_ = status.code();
    lines_.emplace_back(status.message());
  }
  absl::Status Result() const {
    if (lines_.empty()) return absl::OkStatus();
    return absl::Status(code_, fmt::format("{}", fmt::join(lines_, "\n")));
  }

 private:
  absl::StatusCode code_ = absl::StatusCode::kOk;
  std::vector<std::string> lines_;
};

}  // namespace

absl::Status CheckT2Directory(const std::string& setting, const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    const int err = errno;
    if (err == ENOENT)
      return absl::NotFoundError(fmt::format("{}: {} does not exist", setting, path));
    if (err == EACCES) {
      return absl::PermissionDeniedError(fmt::format("{}: {}: permission denied", setting, path));
    }
    return absl::InvalidArgumentError(fmt::format("{}: {}: {}", setting, path, std::strerror(err)));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::InvalidArgumentError(fmt::format("{}: {} is not a directory", setting, path));
  }
  if (::access(path.c_str(), W_OK | X_OK) != 0) {
    return absl::PermissionDeniedError(fmt::format(
        "{}: {}: permission denied (the daemon needs to create files there)", setting, path));
  }
  return absl::OkStatus();
}

namespace {

absl::Status ValidateSizes(const NvmeTierOptions& o) {
  if (o.slot_bytes == 0 || o.slot_bytes % kAlign != 0 || o.slot_bytes > kMaxSlotBytes) {
    return absl::InvalidArgumentError(fmt::format(
        "t2.slot_bytes: {} is not a positive multiple of 4096 up to 1 GiB", o.slot_bytes));
  }
  if (o.capacity_bytes == 0 || o.capacity_bytes % o.slot_bytes != 0) {
    return absl::InvalidArgumentError(
        fmt::format("t2.capacity_bytes: {} is not a positive multiple of t2.slot_bytes ({})",
                    o.capacity_bytes, o.slot_bytes));
  }
  const uint64_t total = o.capacity_bytes / o.slot_bytes * o.directories.size();
  if (total >= UINT32_MAX) {
    return absl::InvalidArgumentError(fmt::format(
        "t2.capacity_bytes: {} directories of {} bytes make {} slots; at most {} are addressable",
        o.directories.size(), o.capacity_bytes, total, UINT32_MAX - 1));
  }
  if (o.queue_depth == 0 || o.queue_depth > 4096) {
    return absl::InvalidArgumentError(
        fmt::format("t2.queue_depth: {} is not in [1, 4096]", o.queue_depth));
  }
  if (o.verify_threads > 64) {
    return absl::InvalidArgumentError(
        fmt::format("t2.verify_threads: {} is not in [0, 64]", o.verify_threads));
  }
  return absl::OkStatus();
}

}  // namespace

uint32_t NvmeTierOptions::VerifyThreads() const {
  if (verify_threads != 0) return verify_threads;
  return std::clamp(std::thread::hardware_concurrency(), 1u, 8u);
}

std::string NvmeTierOptions::MetadataDirectory() const {
  if (!metadata_directory.empty()) return metadata_directory;
  return directories.empty() ? std::string() : directories[0] + "/kvtier-t2-meta";
}

absl::Status NvmeTierOptions::Validate() const {
  Problems problems;
  if (directories.empty()) {
    problems.Add(absl::InvalidArgumentError("t2.directories: at least one directory is needed"));
  }
  for (size_t i = 0; i < directories.size(); ++i) {
    problems.Add(CheckT2Directory(fmt::format("t2.directories[{}]", i), directories[i]));
  }
  problems.Add(ValidateSizes(*this));
  for (size_t i = 0; i < registered_ranges.size(); ++i) {
    const RegisteredRange& r = registered_ranges[i];
    if (r.base == nullptr || r.bytes == 0) {
      problems.Add(absl::InvalidArgumentError(fmt::format(
          "t2.registered_ranges[{}]: empty range (base {}, {} bytes)", i, r.base, r.bytes)));
    }
  }
  if (!metadata_directory.empty()) {
    problems.Add(
        CheckT2Directory("t2.metadata_directory (parent)", MetadataParent(metadata_directory)));
  }
  return problems.Result();
}

std::string MetadataParent(const std::string& metadata_directory) {
  const size_t cut = metadata_directory.find_last_of('/');
  if (cut == std::string::npos) return ".";
  return cut == 0 ? "/" : metadata_directory.substr(0, cut);
}

}  // namespace kvtier
