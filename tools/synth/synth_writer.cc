#include "tools/synth/synth_writer.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <string_view>
#include <vector>

#include "absl/strings/match.h"

namespace kvtier::synth {
namespace {

constexpr size_t kFlushBytes = 1 << 20;

// Where the bytes go: a descriptor, possibly behind a compressor.
class Sink {
 public:
  Sink(int fd, std::string name, bool owns_fd)
      : fd_(fd), name_(std::move(name)), owns_fd_(owns_fd) {}
  virtual ~Sink() {
    if (owns_fd_) close(fd_);
  }
  virtual absl::Status Write(std::string_view bytes) { return WriteRaw(bytes); }
  // Flushes everything; the file is complete only after Finish() returns OK.
  virtual absl::Status Finish() {
    if (owns_fd_ && close(fd_) != 0) return Errno("close");
    owns_fd_ = false;
    return absl::OkStatus();
  }

 protected:
  absl::Status WriteRaw(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = write(fd_, bytes.data(), bytes.size());
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) return Errno("write");
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return absl::OkStatus();
  }
  absl::Status Errno(const char* what) const {
    return absl::InternalError(fmt::format("{}: {} failed: {}", name_, what, std::strerror(errno)));
  }
  const std::string& name() const { return name_; }

 private:
  int fd_;
  std::string name_;
  bool owns_fd_;
};

class GzipSink : public Sink {
 public:
  GzipSink(int fd, std::string name) : Sink(fd, std::move(name), true), out_(kFlushBytes) {
    std::memset(&zs_, 0, sizeof(zs_));
    ok_ = deflateInit2(&zs_, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;  // +16: gzip
  }
  ~GzipSink() override { deflateEnd(&zs_); }
  absl::Status Write(std::string_view bytes) override { return Deflate(bytes, Z_NO_FLUSH); }
  absl::Status Finish() override {
    KVTIER_RETURN_IF_ERROR(Deflate({}, Z_FINISH));
    return Sink::Finish();
  }

 private:
  absl::Status Deflate(std::string_view bytes, int flush) {
    if (!ok_) return absl::InternalError(name() + ": cannot initialise zlib");
    zs_.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(bytes.data()));
    zs_.avail_in = static_cast<uInt>(bytes.size());
    int rc;
    do {
      zs_.next_out = reinterpret_cast<Bytef*>(out_.data());
      zs_.avail_out = static_cast<uInt>(out_.size());
      rc = deflate(&zs_, flush);
      KVTIER_RETURN_IF_ERROR(WriteRaw({out_.data(), out_.size() - zs_.avail_out}));
    } while (zs_.avail_out == 0 || (flush == Z_FINISH && rc != Z_STREAM_END));
    return absl::OkStatus();
  }

  z_stream zs_;
  std::vector<char> out_;
  bool ok_ = false;
};

class ZstdSink : public Sink {
 public:
  ZstdSink(int fd, std::string name)
      : Sink(fd, std::move(name), true), out_(ZSTD_CStreamOutSize()), cctx_(ZSTD_createCCtx()) {}
  ~ZstdSink() override { ZSTD_freeCCtx(cctx_); }
  absl::Status Write(std::string_view bytes) override { return Compress(bytes, ZSTD_e_continue); }
  absl::Status Finish() override {
    KVTIER_RETURN_IF_ERROR(Compress({}, ZSTD_e_end));
    return Sink::Finish();
  }

 private:
  absl::Status Compress(std::string_view bytes, ZSTD_EndDirective mode) {
    ZSTD_inBuffer in{bytes.data(), bytes.size(), 0};
    size_t remaining;
    do {
      ZSTD_outBuffer out{out_.data(), out_.size(), 0};
      remaining = ZSTD_compressStream2(cctx_, &out, &in, mode);
      if (ZSTD_isError(remaining)) {
        return absl::InternalError(
            fmt::format("{}: zstd failed: {}", name(), ZSTD_getErrorName(remaining)));
      }
      KVTIER_RETURN_IF_ERROR(WriteRaw({out_.data(), out.pos}));
    } while (mode == ZSTD_e_end ? remaining != 0 : in.pos < in.size);
    return absl::OkStatus();
  }

  std::vector<char> out_;
  ZSTD_CCtx* cctx_;
};

absl::StatusOr<std::unique_ptr<Sink>> OpenSink(const std::string& path) {
  if (path == "-") return std::make_unique<Sink>(STDOUT_FILENO, "<stdout>", false);
  int fd = open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) {
    return absl::InvalidArgumentError(
        fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  }
  if (absl::EndsWith(path, ".gz")) return std::make_unique<GzipSink>(fd, path);
  if (absl::EndsWith(path, ".zst")) return std::make_unique<ZstdSink>(fd, path);
  return std::make_unique<Sink>(fd, path, true);
}

}  // namespace

absl::Status WriteSynthTrace(const SynthConfig& config, const std::string& path,
                             const std::function<void(uint64_t, uint64_t)>& on_progress) {
  KVTIER_ASSIGN_OR_RETURN(std::unique_ptr<Sink> sink, OpenSink(path));
  WorkloadGenerator generator(config);
  SynthRequest request;
  std::string buffer;
  buffer.reserve(kFlushBytes + (64 << 10));
  for (uint64_t i = 0; i < config.requests; ++i) {
    generator.Next(&request);
    AppendMooncakeLine(request, &buffer);
    if (buffer.size() >= kFlushBytes) {
      KVTIER_RETURN_IF_ERROR(sink->Write(buffer));
      buffer.clear();
      if (on_progress) on_progress(i + 1, config.requests);
    }
  }
  KVTIER_RETURN_IF_ERROR(sink->Write(buffer));
  if (on_progress) on_progress(config.requests, config.requests);
  return sink->Finish();
}

}  // namespace kvtier::synth
