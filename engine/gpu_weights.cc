#include "engine/gpu_weights.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <map>
#include <string>

#include "engine/weights.h"

namespace kvtier::engine {
namespace {

using ops::gpu::DType;

constexpr uint64_t kAlign = 256;                 // each matrix starts on a 256-byte boundary
constexpr size_t kStageElems = size_t{8} << 20;  // 16 MiB of 16-bit elements per staging buffer

// Tensors that continue the previous one without a gap (the fused qkv and gate_up matrices).
bool ContinuesPrevious(const std::string& name) {
  for (const char* suffix :
       {"k_proj.weight", "v_proj.weight", "k_proj.bias", "v_proj.bias", "up_proj.weight"}) {
    if (name.ends_with(suffix)) return true;
  }
  return false;
}

uint16_t FloatToBf16(float f) {  // round to nearest even; NaN stays a quiet NaN
  const uint32_t u = std::bit_cast<uint32_t>(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

uint16_t FloatToFp16(float f) {  // the compiler's IEEE conversion: nearest even, overflow to inf
  return std::bit_cast<uint16_t>(static_cast<_Float16>(f));
}

// Two pinned host buffers: while one is copied to the device, the next piece is read into the
// other. A buffer is reused only after the copy that read it has completed (its event).
class Stager {
 public:
  static absl::StatusOr<Stager> Create() {
    Stager s;
    KVTIER_ASSIGN_OR_RETURN(gpu::Stream stream, gpu::Stream::Create());
    s.stream_ = std::move(stream);
    for (int i = 0; i < 2; ++i) {
      KVTIER_ASSIGN_OR_RETURN(void* p, gpu::PinnedAlloc(kStageElems * 2));
      s.buffers_[i] = static_cast<uint16_t*>(p);
      KVTIER_ASSIGN_OR_RETURN(s.done_[i], gpu::Event::Create());
    }
    return s;
  }
  Stager() = default;
  Stager(Stager&& o) noexcept
      : stream_(std::move(o.stream_)),
        buffers_(std::exchange(o.buffers_, {})),
        done_(std::move(o.done_)),
        next_(o.next_) {}
  ~Stager() {
    if (stream_.handle() != nullptr) (void)stream_.Synchronize();
    for (uint16_t* b : buffers_) (void)gpu::PinnedFree(b);
  }

  // Copies `tensor` (BF16, F16 or F32) to dst as `dtype`, one staging buffer at a time.
  absl::Status Copy(const std::string& name, const TensorView& tensor, DType dtype, void* dst) {
    const size_t src_bytes = SafetensorsElementBytes(tensor.dtype);
    const size_t elems = tensor.data.size() / src_bytes;
    for (size_t at = 0; at < elems; at += kStageElems) {
      const size_t n = std::min(kStageElems, elems - at);
      const int b = next_;
      next_ ^= 1;
      KVTIER_RETURN_IF_ERROR(done_[b].Synchronize());
      TensorView piece = tensor;
      piece.data = tensor.data.subspan(at * src_bytes, n * src_bytes);
      KVTIER_RETURN_IF_ERROR(Convert(name, piece, dtype, n, buffers_[b]));
      KVTIER_RETURN_IF_ERROR(
          gpu::CopyAsync(static_cast<uint16_t*>(dst) + at, buffers_[b], n * 2, stream_.handle()));
      KVTIER_RETURN_IF_ERROR(done_[b].Record(stream_.handle()));
    }
    return absl::OkStatus();
  }

  absl::Status Finish() { return stream_.Synchronize(); }

 private:
  absl::Status Convert(const std::string& name, const TensorView& piece, DType dtype, size_t n,
                       uint16_t* out) {
    const bool same = (dtype == DType::kBf16 && piece.dtype == "BF16") ||
                      (dtype == DType::kFp16 && piece.dtype == "F16");
    if (same) {
      std::memcpy(out, piece.data.data(), n * 2);
      return absl::OkStatus();
    }
    floats_.resize(n);
    KVTIER_RETURN_IF_ERROR(ToFloat32(name, piece, floats_.data()));
    for (size_t i = 0; i < n; ++i) {
      out[i] = dtype == DType::kBf16 ? FloatToBf16(floats_[i]) : FloatToFp16(floats_[i]);
    }
    return absl::OkStatus();
  }

  gpu::Stream stream_;
  std::array<uint16_t*, 2> buffers_{};
  std::array<gpu::Event, 2> done_;
  int next_ = 0;
  std::vector<float> floats_;
};

int64_t Elements(const std::vector<int64_t>& shape) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

// The checkpoint's tensor for `spec`, its shape checked.
absl::StatusOr<const TensorView*> Find(const Checkpoint& ckpt, const WeightSpec& spec) {
  KVTIER_ASSIGN_OR_RETURN(const TensorView* tensor, ckpt.Find(spec.name));
  if (tensor->shape != spec.shape) {
    return absl::InvalidArgumentError(
        fmt::format("{}: tensor \"{}\" has shape [{}]; the config implies [{}]", *tensor->file,
                    spec.name, fmt::join(tensor->shape, ", "), fmt::join(spec.shape, ", ")));
  }
  if (tensor->dtype != "BF16" && tensor->dtype != "F16" && tensor->dtype != "F32") {
    return absl::InvalidArgumentError(
        fmt::format("{}: tensor \"{}\" has dtype {}; expected BF16, F16 or F32", *tensor->file,
                    spec.name, tensor->dtype));
  }
  return tensor;
}

}  // namespace

absl::StatusOr<std::unique_ptr<GpuWeights>> GpuWeights::Upload(const ModelConfig& config,
                                                               const Checkpoint& checkpoint,
                                                               DType dtype) {
  const std::vector<WeightSpec> specs = ExpectedWeights(config);
  std::vector<const TensorView*> tensors;
  std::vector<uint64_t> offsets;
  uint64_t end = 0;
  for (const WeightSpec& spec : specs) {  // check everything before allocating anything
    KVTIER_ASSIGN_OR_RETURN(const TensorView* tensor, Find(checkpoint, spec));
    if (!ContinuesPrevious(spec.name)) end = (end + kAlign - 1) / kAlign * kAlign;
    tensors.push_back(tensor);
    offsets.push_back(end);
    end += static_cast<uint64_t>(Elements(spec.shape)) * 2;
  }
  std::unique_ptr<GpuWeights> w(new GpuWeights());
  w->dtype_ = dtype;
  w->bytes_ = end;
  KVTIER_ASSIGN_OR_RETURN(w->arena_, gpu::DeviceAlloc(end));
  KVTIER_ASSIGN_OR_RETURN(Stager stager, Stager::Create());
  std::map<std::string, const void*> at;
  for (size_t i = 0; i < specs.size(); ++i) {
    void* dst = static_cast<char*>(w->arena_) + offsets[i];
    KVTIER_RETURN_IF_ERROR(stager.Copy(specs[i].name, *tensors[i], dtype, dst));
    at[specs[i].name] = dst;
  }
  KVTIER_RETURN_IF_ERROR(stager.Finish());
  auto find = [&](const std::string& name) {
    auto it = at.find(name);
    return it == at.end() ? nullptr : it->second;
  };
  w->embed_ = find("model.embed_tokens.weight");
  for (uint32_t l = 0; l < config.num_layers; ++l) {
    auto p = [&](const char* suffix) { return find(fmt::format("model.layers.{}.{}", l, suffix)); };
    w->layers_.push_back({.input_norm = p("input_layernorm.weight"),
                          .qkv = p("self_attn.q_proj.weight"),
                          .qkv_bias = p("self_attn.q_proj.bias"),
                          .q_norm = p("self_attn.q_norm.weight"),
                          .k_norm = p("self_attn.k_norm.weight"),
                          .o_proj = p("self_attn.o_proj.weight"),
                          .post_norm = p("post_attention_layernorm.weight"),
                          .gate_up = p("mlp.gate_proj.weight"),
                          .down = p("mlp.down_proj.weight")});
  }
  w->final_norm_ = find("model.norm.weight");
  w->output_ = config.tie_word_embeddings ? w->embed_ : find("lm_head.weight");
  return w;
}

GpuWeights::~GpuWeights() { (void)gpu::DeviceFree(arena_); }

}  // namespace kvtier::engine
