// Reading Hugging Face safetensors checkpoints, memory-mapped: `model.safetensors`, or shards
// `model-0000i-of-0000n.safetensors` named by `model.safetensors.index.json` ("weight_map").
// Nothing is copied: a tensor is a view into the mapping, valid while its Checkpoint lives.
//
// Files are untrusted input. Every size in a header is checked before use: the header length
// against the file, each tensor's data_offsets against the data section, its dtype and shape
// against its byte size (without overflow), and tensors' byte ranges against each other (no
// overlap). A violation is InvalidArgument naming the file and the tensor; a truncated file is one
// whose tensors' ranges end past its end.
//
// Format (https://github.com/huggingface/safetensors): 8 bytes little-endian header length N, N
// bytes of JSON {"name": {"dtype": "BF16", "shape": [..], "data_offsets": [begin, end]}, ...,
// "__metadata__": {..}}, then the data section, offsets relative to its start.
//
// Thread-safety: immutable after Open; safe to read from many threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/status.h"

namespace kvtier::engine {

// safetensors dtype names; those the engine converts are F32, F16 and BF16, the others are
// known only so their sizes can be checked.
struct TensorView {
  std::string dtype;                  // "BF16", "F16", "F32", "I64", ...
  std::vector<int64_t> shape;         // each >= 0
  std::span<const std::byte> data;    // product(shape) * element size bytes, in the mapping
  const std::string* file = nullptr;  // the file it came from (for errors)
};

// Bytes per element of a safetensors dtype name; 0 if unknown.
size_t SafetensorsElementBytes(std::string_view dtype);

// One mapped .safetensors file.
class SafetensorsFile {
 public:
  // Maps and validates `path`. NotFound if it cannot be opened.
  static absl::StatusOr<std::unique_ptr<SafetensorsFile>> Open(const std::string& path);
  ~SafetensorsFile();
  SafetensorsFile(const SafetensorsFile&) = delete;
  SafetensorsFile& operator=(const SafetensorsFile&) = delete;

  const std::string& path() const { return path_; }
  const std::map<std::string, TensorView>& tensors() const { return tensors_; }

 private:
  SafetensorsFile(std::string path, void* base, size_t size)
      : path_(std::move(path)), base_(base), size_(size) {}
  absl::Status ParseHeader();

  std::string path_;
  void* base_ = nullptr;  // the whole file, mapped read-only
  size_t size_ = 0;
  std::map<std::string, TensorView> tensors_;
};

// A model directory's weights, one file or shards.
class Checkpoint {
 public:
  // Opens DIR/model.safetensors.index.json and every shard it names if the index exists, else
  // DIR/model.safetensors. NotFound naming the directory if neither exists.
  static absl::StatusOr<Checkpoint> Open(const std::string& dir);

  // The tensor `name`, or NotFound "<file>: tensor "<name>" is missing", <file> being
  // model.safetensors or the index.
  absl::StatusOr<const TensorView*> Find(const std::string& name) const;

  const std::string& dir() const { return dir_; }
  size_t size() const { return tensors_.size(); }

 private:
  // Opens the shards source_ (the index) names.
  absl::Status OpenShards();

  std::string dir_;
  std::string source_;  // model.safetensors or model.safetensors.index.json, for errors
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
  std::map<std::string, const TensorView*> tensors_;  // into files_
};

}  // namespace kvtier::engine
