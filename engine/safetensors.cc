#include "engine/safetensors.h"

#include <fcntl.h>
#include <fmt/format.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <nlohmann/json.hpp>
#include <optional>

#include "common/errno_text.h"

namespace kvtier::engine {
namespace {

using Json = nlohmann::json;

// The safetensors library refuses headers above 100 MB; so do we, before allocating for one.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

struct Range {
  uint64_t begin, end;
  const std::string* name;
};

std::optional<uint64_t> Offset(const Json& value) {
  if (!value.is_number_unsigned()) return std::nullopt;
  return value.get<uint64_t>();
}

}  // namespace

size_t SafetensorsElementBytes(std::string_view dtype) {
  if (dtype == "F64" || dtype == "I64" || dtype == "U64") return 8;
  if (dtype == "F32" || dtype == "I32" || dtype == "U32") return 4;
  if (dtype == "F16" || dtype == "BF16" || dtype == "I16" || dtype == "U16") return 2;
  if (dtype == "I8" || dtype == "U8" || dtype == "BOOL" || dtype == "F8_E4M3" ||
      dtype == "F8_E5M2") {
    return 1;
  }
  return 0;
}

absl::StatusOr<std::unique_ptr<SafetensorsFile>> SafetensorsFile::Open(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return absl::NotFoundError(fmt::format("cannot open {}: {}", path, ErrnoText(errno)));
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    const int err = errno;
    ::close(fd);
    return absl::InternalError(fmt::format("{}: fstat: {}", path, ErrnoText(err)));
  }
  const size_t size = static_cast<size_t>(st.st_size);
  void* base = nullptr;
  if (size > 0) {
    base = ::mmap(nullptr, size, PROT_READ, MAP_PRIVATE, fd, 0);
    if (base == MAP_FAILED) {
      const int err = errno;
      ::close(fd);
      return absl::InternalError(fmt::format("{}: mmap: {}", path, ErrnoText(err)));
    }
  }
  ::close(fd);  // the mapping keeps the file
  std::unique_ptr<SafetensorsFile> file(new SafetensorsFile(path, base, size));
  KVTIER_RETURN_IF_ERROR(file->ParseHeader());
  return file;
}

SafetensorsFile::~SafetensorsFile() {
  if (base_ != nullptr) ::munmap(base_, size_);
}

namespace {

// Reads `shape` into `out` and multiplies `bytes` by each size; the problem, or nullptr.
const char* ReadShape(const Json& shape, std::vector<int64_t>* out, uint64_t* bytes) {
  for (const Json& dim : shape) {
    if (!dim.is_number_unsigned()) return "is not a list of sizes";
    const uint64_t d = dim.get<uint64_t>();
    if (d > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(*bytes, d, bytes)) {
      return "overflows";
    }
    out->push_back(static_cast<int64_t>(d));
  }
  return nullptr;
}

// Checks one header entry and returns its view; `data` is the data section.
absl::StatusOr<TensorView> ParseEntry(const std::string& path, const std::string& name,
                                      const Json& entry, std::span<const std::byte> data) {
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(fmt::format("{}: tensor \"{}\": {}", path, name, what));
  };
  if (!entry.is_object()) return bad(fmt::format("expected an object, got {}", entry.dump()));
  auto dtype = entry.find("dtype");
  auto shape = entry.find("shape");
  auto offsets = entry.find("data_offsets");
  if (dtype == entry.end() || !dtype->is_string()) return bad("\"dtype\" missing or not a string");
  TensorView view;
  view.dtype = dtype->get<std::string>();
  const size_t elem = SafetensorsElementBytes(view.dtype);
  if (elem == 0) return bad(fmt::format("unknown dtype \"{}\"", view.dtype));
  if (shape == entry.end() || !shape->is_array()) return bad("\"shape\" missing or not a list");
  uint64_t bytes = elem;
  if (const char* problem = ReadShape(*shape, &view.shape, &bytes)) {
    return bad(fmt::format("shape {} {}", shape->dump(), problem));
  }
  if (offsets == entry.end() || !offsets->is_array() || offsets->size() != 2) {
    return bad("\"data_offsets\" missing or not [begin, end]");
  }
  const std::optional<uint64_t> begin = Offset((*offsets)[0]), end = Offset((*offsets)[1]);
  if (!begin || !end || *begin > *end) {
    return bad(
        fmt::format("data_offsets {} are not [begin, end] with begin <= end", offsets->dump()));
  }
  if (*end > data.size()) {
    return bad(fmt::format("data_offsets {} end past the data section ({} bytes): truncated file?",
                           offsets->dump(), data.size()));
  }
  if (*end - *begin != bytes) {
    return bad(fmt::format("dtype {} shape {} needs {} bytes, but data_offsets {} hold {}",
                           view.dtype, shape->dump(), bytes, offsets->dump(), *end - *begin));
  }
  view.data = data.subspan(*begin, *end - *begin);
  return view;
}

absl::Status CheckNoOverlap(const std::string& path, std::vector<Range> ranges) {
  std::sort(ranges.begin(), ranges.end(),
            [](const Range& a, const Range& b) { return a.begin < b.begin; });
  const Range* prev = nullptr;
  for (const Range& r : ranges) {
    if (r.begin == r.end) continue;  // an empty tensor overlaps nothing
    if (prev != nullptr && r.begin < prev->end) {
      return absl::InvalidArgumentError(
          fmt::format("{}: tensors \"{}\" [{}, {}) and \"{}\" [{}, {}) overlap", path, *prev->name,
                      prev->begin, prev->end, *r.name, r.begin, r.end));
    }
    prev = &r;
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SafetensorsFile::ParseHeader() {
  if (size_ < 8) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: {} bytes, too short for a safetensors file (8-byte header length)", path_, size_));
  }
  const auto* bytes = static_cast<const std::byte*>(base_);
  uint64_t header_len = 0;
  std::memcpy(&header_len, bytes, 8);  // little-endian, as are the hosts kvtier builds for
  if (header_len > kMaxHeaderBytes || header_len > size_ - 8) {
    return absl::InvalidArgumentError(fmt::format(
        "{}: header length {} does not fit in the file ({} bytes) or exceeds {} bytes: truncated "
        "or not a safetensors file",
        path_, header_len, size_, kMaxHeaderBytes));
  }
  Json header;
  try {
    header = Json::parse(reinterpret_cast<const char*>(bytes + 8),
                         reinterpret_cast<const char*>(bytes + 8 + header_len));
  } catch (const Json::parse_error& e) {
    return absl::InvalidArgumentError(
        fmt::format("{}: header is not valid JSON ({})", path_, e.what()));
  }
  if (!header.is_object()) {
    return absl::InvalidArgumentError(fmt::format("{}: header is not a JSON object", path_));
  }
  const std::span<const std::byte> data(bytes + 8 + header_len, size_ - 8 - header_len);
  std::vector<Range> ranges;
  for (const auto& [name, entry] : header.items()) {
    if (name == "__metadata__") continue;  // free-form strings
    KVTIER_ASSIGN_OR_RETURN(TensorView view, ParseEntry(path_, name, entry, data));
    view.file = &path_;
    const uint64_t begin = static_cast<uint64_t>(view.data.data() - data.data());
    auto [it, inserted] = tensors_.emplace(name, std::move(view));
    ranges.push_back({begin, begin + it->second.data.size(), &it->first});
  }
  return CheckNoOverlap(path_, std::move(ranges));
}

}  // namespace kvtier::engine
