#include "tools/common/input_stream.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>
#include <zstd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace kvtier {
namespace {

constexpr size_t kReadChunk = 1 << 20;

// The raw bytes of the file: the first few bytes, read early to detect the compression, are served
// again before the rest.
class RawInput {
 public:
  RawInput(int fd, std::string name, bool owns_fd)
      : fd_(fd), owns_fd_(owns_fd), name_(std::move(name)) {}
  ~RawInput() {
    if (owns_fd_) close(fd_);
  }
  RawInput(const RawInput&) = delete;
  RawInput& operator=(const RawInput&) = delete;

  // Reads up to `n` bytes; 0 at end of file.
  absl::StatusOr<size_t> Read(char* dst, size_t n) {
    if (pending_pos_ < pending_.size()) {
      size_t k = std::min(n, pending_.size() - pending_pos_);
      std::memcpy(dst, pending_.data() + pending_pos_, k);
      pending_pos_ += k;
      return k;
    }
    return ReadFd(dst, n);
  }

  // Reads up to 4 bytes without consuming them.
  absl::StatusOr<std::string> Peek() {
    char magic[4];
    size_t got = 0;
    while (got < sizeof(magic)) {
      KVTIER_ASSIGN_OR_RETURN(size_t k, ReadFd(magic + got, sizeof(magic) - got));
      if (k == 0) break;
      got += k;
    }
    pending_.assign(magic, magic + got);
    return std::string(magic, got);
  }

  uint64_t consumed() const { return consumed_; }
  const std::string& name() const { return name_; }

 private:
  absl::StatusOr<size_t> ReadFd(char* dst, size_t n) {
    for (;;) {
      ssize_t k = read(fd_, dst, n);
      if (k >= 0) {
        consumed_ += static_cast<uint64_t>(k);
        return static_cast<size_t>(k);
      }
      if (errno != EINTR) {
        return absl::InternalError(fmt::format("{}: read failed: {}", name_, std::strerror(errno)));
      }
    }
  }

  int fd_;
  bool owns_fd_;
  std::string name_;
  std::vector<char> pending_;
  size_t pending_pos_ = 0;
  uint64_t consumed_ = 0;
};

// Turns raw bytes into plain bytes.
class Decoder {
 public:
  virtual ~Decoder() = default;
  // Writes up to `n` decoded bytes to `dst`; 0 means a clean end of the input.
  virtual absl::StatusOr<size_t> Decode(char* dst, size_t n) = 0;
};

class PlainDecoder : public Decoder {
 public:
  explicit PlainDecoder(RawInput* raw) : raw_(raw) {}
  absl::StatusOr<size_t> Decode(char* dst, size_t n) override { return raw_->Read(dst, n); }

 private:
  RawInput* raw_;
};

// zlib inflate with automatic gzip/zlib header detection. Concatenated gzip members (what
// `cat a.gz b.gz` or pigz produce) are decoded one after the other, as gzip(1) does.
class GzipDecoder : public Decoder {
 public:
  explicit GzipDecoder(RawInput* raw) : raw_(raw), in_(kReadChunk) {
    std::memset(&zs_, 0, sizeof(zs_));
    ok_ = inflateInit2(&zs_, 15 + 32) == Z_OK;
  }
  ~GzipDecoder() override { inflateEnd(&zs_); }

  absl::StatusOr<size_t> Decode(char* dst, size_t n) override {
    if (!ok_) return absl::InternalError(raw_->name() + ": cannot initialise zlib");
    n = std::min<size_t>(n, std::numeric_limits<uInt>::max());  // zlib counts in uInt
    zs_.next_out = reinterpret_cast<Bytef*>(dst);
    zs_.avail_out = static_cast<uInt>(n);
    while (zs_.avail_out == n) {
      if (zs_.avail_in == 0) {
        KVTIER_ASSIGN_OR_RETURN(size_t k, raw_->Read(in_.data(), in_.size()));
        if (k == 0) {
          if (member_done_) return 0;
          return absl::InvalidArgumentError(raw_->name() + ": truncated gzip data");
        }
        zs_.next_in = reinterpret_cast<Bytef*>(in_.data());
        zs_.avail_in = static_cast<uInt>(k);
      }
      if (member_done_) {  // more bytes after a finished member: the next member starts
        inflateReset(&zs_);
        member_done_ = false;
      }
      int rc = inflate(&zs_, Z_NO_FLUSH);
      if (rc == Z_STREAM_END) {
        member_done_ = true;
      } else if (rc != Z_OK && rc != Z_BUF_ERROR) {
        return absl::InvalidArgumentError(fmt::format("{}: corrupt gzip data ({})", raw_->name(),
                                                      zs_.msg ? zs_.msg : zError(rc)));
      }
    }
    return n - zs_.avail_out;
  }

 private:
  RawInput* raw_;
  std::vector<char> in_;
  z_stream zs_;
  bool ok_ = false;
  bool member_done_ = false;
};

// libzstd streaming decompression; consecutive frames are decoded one after the other.
class ZstdDecoder : public Decoder {
 public:
  explicit ZstdDecoder(RawInput* raw)
      : raw_(raw), in_(ZSTD_DStreamInSize()), dctx_(ZSTD_createDCtx()) {}
  ~ZstdDecoder() override { ZSTD_freeDCtx(dctx_); }

  absl::StatusOr<size_t> Decode(char* dst, size_t n) override {
    ZSTD_outBuffer out{dst, n, 0};
    while (out.pos == 0) {
      if (input_.pos == input_.size) {
        KVTIER_ASSIGN_OR_RETURN(size_t k, raw_->Read(in_.data(), in_.size()));
        if (k == 0) {
          if (frame_done_) return 0;
          return absl::InvalidArgumentError(raw_->name() + ": truncated zstd data");
        }
        input_ = ZSTD_inBuffer{in_.data(), k, 0};
      }
      size_t rc = ZSTD_decompressStream(dctx_, &out, &input_);
      if (ZSTD_isError(rc)) {
        return absl::InvalidArgumentError(
            fmt::format("{}: corrupt zstd data ({})", raw_->name(), ZSTD_getErrorName(rc)));
      }
      frame_done_ = rc == 0;
    }
    return out.pos;
  }

 private:
  RawInput* raw_;
  std::vector<char> in_;
  ZSTD_inBuffer input_{nullptr, 0, 0};
  ZSTD_DCtx* dctx_;
  bool frame_done_ = true;
};

class LineReaderImpl : public LineReader {
 public:
  LineReaderImpl(int fd, std::string name, bool owns_fd)
      : raw_(fd, std::move(name), owns_fd),
        buf_(new char[kInitialBuffer + kLinePadding]),
        capacity_(kInitialBuffer + kLinePadding) {
    struct stat st;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode)) total_ = static_cast<uint64_t>(st.st_size);
    absl::StatusOr<std::string> magic = raw_.Peek();
    if (!magic.ok()) {
      status_ = magic.status();
      eof_ = true;
      decoder_ = std::make_unique<PlainDecoder>(&raw_);
      return;
    }
    if (magic->size() >= 2 && (*magic)[0] == '\x1f' && (*magic)[1] == '\x8b') {
      compression_ = Compression::kGzip;
      decoder_ = std::make_unique<GzipDecoder>(&raw_);
    } else if (*magic == std::string("\x28\xb5\x2f\xfd", 4)) {
      compression_ = Compression::kZstd;
      decoder_ = std::make_unique<ZstdDecoder>(&raw_);
    } else if (const char* other = UnsupportedCompression(*magic)) {
      status_ = absl::InvalidArgumentError(
          fmt::format("{}: {}-compressed input is not supported (use plain, gzip or zstd)",
                      raw_.name(), other));
      eof_ = true;
      decoder_ = std::make_unique<PlainDecoder>(&raw_);
    } else {
      decoder_ = std::make_unique<PlainDecoder>(&raw_);
    }
  }

  // The name of a compression format we recognise but do not read, or nullptr.
  static const char* UnsupportedCompression(const std::string& magic) {
    if (magic.rfind("BZh", 0) == 0) return "bzip2";
    if (magic.rfind("\xfd"
                    "7zX",
                    0) == 0)
      return "xz";
    if (magic.rfind("\x04\x22\x4d\x18", 0) == 0) return "lz4";
    return nullptr;
  }

  bool Next(std::string_view* line) override {
    for (;;) {
      char* nl = static_cast<char*>(std::memchr(buf_.get() + scan_, '\n', end_ - scan_));
      if (nl != nullptr) {
        size_t stop = static_cast<size_t>(nl - buf_.get());
        *line = std::string_view(buf_.get() + begin_, stop - begin_);
        begin_ = scan_ = stop + 1;
        return true;
      }
      scan_ = end_;
      if (eof_) {
        if (begin_ == end_) return false;
        *line = std::string_view(buf_.get() + begin_, end_ - begin_);
        begin_ = end_;
        return true;
      }
      Fill();
    }
  }

  const absl::Status& status() const override { return status_; }
  uint64_t bytes_consumed() const override { return raw_.consumed(); }
  uint64_t total_bytes() const override { return total_; }
  Compression compression() const override { return compression_; }
  const std::string& name() const override { return raw_.name(); }

 private:
  // Big enough for efficient reads, small enough to stay in cache and cost few page faults: the
  // buffer is not zeroed, and only grows for a line longer than it.
  static constexpr size_t kInitialBuffer = 256 << 10;

  // Moves the unfinished line to the front (growing the buffer if it fills it) and appends decoded
  // bytes after it. Keeps kLinePadding bytes spare at the end of the buffer.
  void Fill() {
    size_t pending = end_ - begin_;
    if (begin_ > 0) {
      std::memmove(buf_.get(), buf_.get() + begin_, pending);
      begin_ = 0;
      scan_ = end_ = pending;
    }
    if (capacity_ - kLinePadding - end_ < kInitialBuffer / 4) Grow();
    absl::StatusOr<size_t> got =
        decoder_->Decode(buf_.get() + end_, capacity_ - kLinePadding - end_);
    if (!got.ok()) {
      status_ = got.status();
      eof_ = true;
      begin_ = scan_ = end_;  // drop the partial line: the error is what the caller must see
      return;
    }
    if (*got == 0) eof_ = true;
    end_ += *got;
    std::memset(buf_.get() + end_, 0, kLinePadding);
  }

  void Grow() {
    std::unique_ptr<char[]> bigger(new char[capacity_ * 2]);
    std::memcpy(bigger.get(), buf_.get(), end_);
    buf_ = std::move(bigger);
    capacity_ *= 2;
  }

  RawInput raw_;
  std::unique_ptr<Decoder> decoder_;
  Compression compression_ = Compression::kNone;
  uint64_t total_ = 0;
  std::unique_ptr<char[]> buf_;  // decoded bytes, then at least kLinePadding spare bytes
  size_t capacity_;
  size_t begin_ = 0;  // start of the next line
  size_t scan_ = 0;   // where to continue looking for '\n'
  size_t end_ = 0;    // end of the decoded bytes
  bool eof_ = false;
  absl::Status status_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<LineReader>> LineReader::Open(const std::string& path) {
  if (path == "-") return FromFd(STDIN_FILENO, "<stdin>", /*owns_fd=*/false);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    std::string what = fmt::format("cannot open {}: {}", path, std::strerror(errno));
    if (errno == ENOENT) return absl::NotFoundError(what);
    if (errno == EACCES || errno == EPERM) return absl::PermissionDeniedError(what);
    return absl::InvalidArgumentError(what);
  }
  struct stat st;
  if (fstat(fd, &st) == 0 && S_ISDIR(st.st_mode)) {
    close(fd);
    return absl::InvalidArgumentError(fmt::format("cannot read {}: it is a directory", path));
  }
  return FromFd(fd, path, /*owns_fd=*/true);
}

std::unique_ptr<LineReader> LineReader::FromFd(int fd, std::string name, bool owns_fd) {
  return std::make_unique<LineReaderImpl>(fd, std::move(name), owns_fd);
}

}  // namespace kvtier
