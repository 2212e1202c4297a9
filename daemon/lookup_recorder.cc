#include "daemon/lookup_recorder.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>

#include "common/errno_text.h"

namespace kvtier {
namespace {

absl::StatusOr<std::FILE*> OpenForAppend(const std::string& path) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0640);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        fmt::format("--record {}: cannot open for appending: {}", path, ErrnoText(errno)));
  }
  std::FILE* file = ::fdopen(fd, "a");
  if (file == nullptr) {
    ::close(fd);
    return absl::InternalError(fmt::format("--record {}: fdopen: {}", path, ErrnoText(errno)));
  }
  return file;
}

}  // namespace

absl::StatusOr<std::unique_ptr<LookupRecorder>> LookupRecorder::Open(const std::string& path) {
  KVTIER_ASSIGN_OR_RETURN(std::FILE * file, OpenForAppend(path));
  return std::unique_ptr<LookupRecorder>(new LookupRecorder(path, file));
}

LookupRecorder::LookupRecorder(std::string path, std::FILE* file)
    : path_(std::move(path)), file_(file) {}

LookupRecorder::~LookupRecorder() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) std::fclose(file_);
}

void LookupRecorder::Record(uint32_t block_tokens, absl::Span<const BlockKey> keys) {
  const auto now = std::chrono::steady_clock::now();
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - start_).count();
  absl::MutexLock lock(&mu_);
  if (file_ == nullptr) return;
  line_.clear();
  fmt::format_to(std::back_inserter(line_),
                 "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": 0, \"hash_ids\": [",
                 ms, uint64_t{block_tokens} * keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    fmt::format_to(std::back_inserter(line_), "{}{}", i == 0 ? "" : ", ", TraceId(keys[i]));
  }
  line_ += "]}\n";
  std::fwrite(line_.data(), 1, line_.size(), file_);
  ++lines_;
}

void LookupRecorder::Flush() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) std::fflush(file_);
}

absl::Status LookupRecorder::Reopen() {
  absl::MutexLock lock(&mu_);
  if (file_ != nullptr) std::fclose(file_);
  file_ = nullptr;
  KVTIER_ASSIGN_OR_RETURN(file_, OpenForAppend(path_));
  return absl::OkStatus();
}

uint64_t LookupRecorder::lines() const {
  absl::MutexLock lock(&mu_);
  return lines_;
}

}  // namespace kvtier
