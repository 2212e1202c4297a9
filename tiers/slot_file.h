// One T2 slot file: `slots` fixed-size slots back to back in one file opened O_DIRECT, so a slot
// read or write goes straight between the device and the caller's (T1) memory. Internal to the T2
// tier. The file is created at the full size on first use; an existing file of the right size is
// reused as it is (warm restart) and one of another size is an error (the layout changed).
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "common/status.h"

namespace kvtier {

class SlotFile {
 public:
  static constexpr char kFileName[] = "kvtier-t2.slots";

  // Opens or creates `<directory>/kvtier-t2.slots`. `preallocate`: reserve every block with
  // fallocate (ENOSPC at start, not mid-write); otherwise a sparse file. `setting` names the config
  // entry in errors (e.g. "t2.directories[1]"). When sizing a new (or empty) file fails, the file
  // is left as it was found: removed if this call created it, else emptied again.
  static absl::StatusOr<std::unique_ptr<SlotFile>> Open(const std::string& directory,
                                                        uint64_t bytes, bool preallocate,
                                                        const std::string& setting);
  ~SlotFile();
  SlotFile(const SlotFile&) = delete;
  SlotFile& operator=(const SlotFile&) = delete;

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  // True when Open created the file (there was none): a failed start removes it again.
  bool created() const { return created_; }
  // fdatasync(2) of the file: OK or Internal with errno text.
  absl::Status Sync() const;
  // Makes sure [offset, offset + bytes) has disk blocks behind it (fallocate(2), keeping the size
  // and any data there): ResourceExhausted on ENOSPC / EDQUOT / EFBIG, Internal otherwise.
  absl::Status Reserve(uint64_t offset, uint64_t bytes) const;

 private:
  SlotFile(int fd, std::string path, bool created)
      : fd_(fd), path_(std::move(path)), created_(created) {}
  const int fd_;
  const std::string path_;
  const bool created_;
};

}  // namespace kvtier
