#include "tiers/slot_file.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace kvtier {
namespace {

absl::Status Errno(int err, const std::string& setting, const std::string& what) {
  const std::string msg = fmt::format("{}: {}: {}", setting, what, std::strerror(err));
  if (err == ENOSPC || err == EDQUOT || err == EFBIG) return absl::ResourceExhaustedError(msg);
  if (err == EACCES || err == EPERM) return absl::PermissionDeniedError(msg);
  return absl::InternalError(msg);
}

// Gives a new (empty) file its full size.
absl::Status Size(int fd, uint64_t bytes, bool preallocate, const std::string& setting,
                  const std::string& path) {
  if (preallocate) {
    const int rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
    if (rc != 0) {
      return Errno(rc, setting,
                   fmt::format("reserving {} bytes for {} (t2.capacity_bytes)", bytes, path));
    }
    return absl::OkStatus();
  }
  if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0) {
    return Errno(errno, setting, fmt::format("sizing {} to {} bytes", path, bytes));
  }
  return absl::OkStatus();
}

// Opens `path`, creating it when missing; *created says whether this call made it.
int OpenOrCreate(const std::string& path, bool* created) {
  constexpr int kFlags = O_RDWR | O_DIRECT | O_CLOEXEC;
  int fd = ::open(path.c_str(), kFlags);
  *created = false;
  if (fd < 0 && errno == ENOENT) {
    fd = ::open(path.c_str(), kFlags | O_CREAT | O_EXCL, 0600);
    *created = fd >= 0;
  }
  return fd;
}

}  // namespace

absl::StatusOr<std::unique_ptr<SlotFile>> SlotFile::Open(const std::string& directory,
                                                         uint64_t bytes, bool preallocate,
                                                         const std::string& setting) {
  const std::string path = directory + "/" + kFileName;
  bool created = false;
  const int fd = OpenOrCreate(path, &created);
  if (fd < 0) {
    const int err = errno;
    if (err == EINVAL) {
      return absl::InvalidArgumentError(
          fmt::format("{}: {}: the file system does not support O_DIRECT", setting, path));
    }
    return Errno(err, setting, fmt::format("opening {}", path));
  }
  std::unique_ptr<SlotFile> file(new SlotFile(fd, path, created));
  struct stat st;
  if (::fstat(fd, &st) != 0) return Errno(errno, setting, fmt::format("stat {}", path));
  const auto size = static_cast<uint64_t>(st.st_size);
  if (size == 0) {
    if (absl::Status s = Size(fd, bytes, preallocate, setting, path); !s.ok()) {
      // A failed fallocate may leave part of the file allocated and sized: a next start would
      // take it for a file of another layout. The file held nothing: back to how it was found.
      if (created) {
        ::unlink(path.c_str());
      } else {
        (void)!::ftruncate(fd, 0);
      }
      return s;
    }
  } else if (size != bytes) {
    return absl::FailedPreconditionError(fmt::format(
        "{}: {} holds {} bytes but t2.capacity_bytes is {}; restore the setting or remove the file",
        setting, path, size, bytes));
  }
  return file;
}

SlotFile::~SlotFile() { ::close(fd_); }

absl::Status SlotFile::Sync() const {
  if (::fdatasync(fd_) != 0) {
    return absl::InternalError(fmt::format("t2: fdatasync {}: {}", path_, std::strerror(errno)));
  }
  return absl::OkStatus();
}

absl::Status SlotFile::Reserve(uint64_t offset, uint64_t bytes) const {
  if (::fallocate(fd_, FALLOC_FL_KEEP_SIZE, static_cast<off_t>(offset),
                  static_cast<off_t>(bytes)) != 0) {
    return Errno(errno, "t2", fmt::format("reserving {} bytes at {} in {}", bytes, offset, path_));
  }
  return absl::OkStatus();
}

}  // namespace kvtier
