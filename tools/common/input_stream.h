// Line-by-line reading of a file or stdin that may be plain, gzip- or zstd-compressed. The
// compression is detected from the first bytes (gzip 1f 8b, zstd 28 b5 2f fd), never from the
// file name, so `zcat`-style pipes and misnamed files both work.
//
// Built for throughput: lines are handed out as views into one reused buffer (no allocation per
// line), and every view is followed by at least kLinePadding readable bytes so it can be handed to
// simdjson without a copy.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "common/status.h"

namespace kvtier {

enum class Compression { kNone, kGzip, kZstd };

class LineReader {
 public:
  // Readable bytes guaranteed after the end of every line view (>= SIMDJSON_PADDING).
  static constexpr size_t kLinePadding = 64;

  // Opens `path`, or stdin for "-". NotFound / PermissionDenied / InvalidArgument (a directory)
  // name the path.
  static absl::StatusOr<std::unique_ptr<LineReader>> Open(const std::string& path);
  // Reads from an already open descriptor; `name` is used in messages. Takes ownership of `fd` if
  // `owns_fd` (closed by the destructor). Useful for pipes.
  static std::unique_ptr<LineReader> FromFd(int fd, std::string name, bool owns_fd);

  virtual ~LineReader() = default;

  // Sets *line to the next line, without its "\n" (a trailing "\r" is kept; JSON treats it as
  // whitespace). The view stays valid until the next call. Returns false at the end of the input
  // or on an error; then status() says which. The last line need not end with "\n".
  virtual bool Next(std::string_view* line) = 0;
  // OK after a clean end of input; otherwise what went wrong (I/O error, corrupt or truncated
  // compressed data), naming the input.
  virtual const absl::Status& status() const = 0;

  // Bytes read from the underlying file so far (compressed bytes for compressed input), for
  // progress reporting against total_bytes().
  virtual uint64_t bytes_consumed() const = 0;
  // Size of the underlying file if it is a regular file, else 0 (pipes, stdin from a terminal).
  virtual uint64_t total_bytes() const = 0;
  // Known after construction: detection happens when the reader is created.
  virtual Compression compression() const = 0;
  // The path as given, or "<stdin>" for "-".
  virtual const std::string& name() const = 0;
};

}  // namespace kvtier
