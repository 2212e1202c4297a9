// Shared by the GPU-vs-CPU-reference operator tests (ops_gpu_*_test.cc): 16-bit conversions on the
// host, device buffers, seeded random data and a tolerance check that names the worst element.
//
// How the tests compare: inputs are drawn in float, rounded to the GPU's 16-bit format, and the
// CPU reference runs in fp32 on exactly those rounded values; so the difference measured is the
// GPU's own arithmetic (fp32 inside, a rounded 16-bit output), and the tolerances state that.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "kernels/gpu_runtime.h"
#include "kernels/ops/gpu/ops_gpu.h"
#include "tests/kernels/gpu_test_util.h"

namespace kvtier::ops_gpu_test {

using ops::gpu::DType;

inline uint16_t ToBf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 0x40);
  return static_cast<uint16_t>((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
inline float FromBf16(uint16_t b) {
  const uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}
inline uint16_t ToFp16(float f) {
  const _Float16 h = static_cast<_Float16>(f);
  uint16_t b;
  std::memcpy(&b, &h, 2);
  return b;
}
inline float FromFp16(uint16_t b) {
  _Float16 h;
  std::memcpy(&h, &b, 2);
  return static_cast<float>(h);
}
inline uint16_t To16(DType t, float f) { return t == DType::kBf16 ? ToBf16(f) : ToFp16(f); }
inline float From16(DType t, uint16_t b) { return t == DType::kBf16 ? FromBf16(b) : FromFp16(b); }

// Rounds `v` to the format in place and returns its 16-bit encoding.
inline std::vector<uint16_t> Round16(DType t, std::vector<float>& v) {
  std::vector<uint16_t> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    out[i] = To16(t, v[i]);
    v[i] = From16(t, out[i]);
  }
  return out;
}
inline std::vector<float> Widen(DType t, const std::vector<uint16_t>& v) {
  std::vector<float> out(v.size());
  for (size_t i = 0; i < v.size(); ++i) out[i] = From16(t, v[i]);
  return out;
}

inline std::vector<float> Uniform(size_t n, float lo, float hi, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_real_distribution<float> dist(lo, hi);
  std::vector<float> v(n);
  for (float& x : v) x = dist(rng);
  return v;
}

// Device memory freed on scope exit; Upload/Download are synchronous.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(size_t bytes) : bytes_(bytes) {
    absl::StatusOr<void*> p = gpu::DeviceAlloc(bytes < 16 ? 16 : bytes);
    EXPECT_TRUE(p.ok()) << p.status();
    p_ = p.ok() ? *p : nullptr;
  }
  template <typename T>
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size() * sizeof(T)) {
    Upload(host);
  }
  DeviceBuffer(DeviceBuffer&& o) noexcept : p_(std::exchange(o.p_, nullptr)), bytes_(o.bytes_) {}
  DeviceBuffer& operator=(DeviceBuffer&& o) noexcept {
    std::swap(p_, o.p_);
    std::swap(bytes_, o.bytes_);
    return *this;
  }
  ~DeviceBuffer() { (void)gpu::DeviceFree(p_); }
  void* get() const { return p_; }
  template <typename T>
  T* as() const {
    return static_cast<T*>(p_);
  }
  template <typename T>
  void Upload(const std::vector<T>& host) {
    ASSERT_LE(host.size() * sizeof(T), bytes_);
    const absl::Status s = gpu::CopyAsync(p_, host.data(), host.size() * sizeof(T), nullptr);
    ASSERT_TRUE(s.ok()) << s;
    ASSERT_TRUE(gpu::DeviceSynchronize().ok());
  }
  template <typename T>
  std::vector<T> Download(size_t count) const {
    std::vector<T> host(count);
    EXPECT_TRUE(gpu::DeviceSynchronize().ok());
    const absl::Status s = gpu::CopyAsync(host.data(), p_, count * sizeof(T), nullptr);
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_TRUE(gpu::DeviceSynchronize().ok());
    return host;
  }

 private:
  void* p_ = nullptr;
  size_t bytes_ = 0;
};

// |got - want| <= atol + rtol * |want| for every element; on failure, the count and the worst one.
inline ::testing::AssertionResult Near(const std::vector<float>& got,
                                       const std::vector<float>& want, double atol, double rtol) {
  if (got.size() != want.size()) {
    return ::testing::AssertionFailure() << "size " << got.size() << " != " << want.size();
  }
  size_t bad = 0;
  size_t worst = 0;
  double worst_excess = -1;
  for (size_t i = 0; i < got.size(); ++i) {
    const double err = std::fabs(static_cast<double>(got[i]) - want[i]);
    const double excess = err - (atol + rtol * std::fabs(want[i]));
    if (!(excess <= 0)) ++bad;  // NaN counts as bad
    if (!(excess <= worst_excess)) {
      worst_excess = excess;
      worst = i;
    }
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << bad << " of " << got.size() << " elements outside atol " << atol << " + rtol " << rtol
         << "; worst at " << worst << ": got " << got[worst] << ", want " << want[worst];
}

// The stated tolerances: one rounding of the output to the format (2^-8 relative for bf16's 8-bit
// significand, 2^-11 for fp16) plus the intermediate roundings the operator documents, with a
// factor of 2 of headroom; atol covers results near zero that are sums of larger terms.
struct Tolerance {
  double atol;
  double rtol;
};
inline Tolerance ElementwiseTolerance(DType t) {
  return t == DType::kBf16 ? Tolerance{1e-3, 1.0 / 64} : Tolerance{1e-4, 1.0 / 512};
}

}  // namespace kvtier::ops_gpu_test
