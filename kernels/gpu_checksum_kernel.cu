// Device side of kernels/gpu_checksum.h: XXH3-64 (xxhash.h's XXH3_64bits: default secret, seed 0)
// with one thread block per payload.
//
// Inputs of at most 240 bytes take XXH3's short paths on one thread. Longer ones take its long
// loop, reorganised for many threads without changing a bit of the result: within one 1 KiB XXH3
// block, each stripe only *adds* to the eight 64-bit accumulators a value that depends on the data
// and the secret, never on the accumulators, so the sixteen stripes' additions can be summed in any
// order (addition mod 2^64 is associative). Groups of eight threads sum one block's additions each
// (thread j of a group owns accumulator lane j), blockDim/8 blocks at once; then eight threads
// apply those sums in order, each followed by the block's scramble (the only step that depends on
// the accumulators), lane by lane (the scramble mixes no lanes). The last partial block, the last
// stripe and the final merge follow xxhash.h step for step.
#include <cstdint>

#include "kernels/gpu_checksum_launch.h"
#include "kernels/gpu_vendor.h"

namespace kvtier {
namespace {

constexpr uint64_t kPrime32_1 = 0x9E3779B1u;
constexpr uint64_t kPrime32_2 = 0x85EBCA77u;
constexpr uint64_t kPrime32_3 = 0xC2B2AE3Du;
constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t kPrime64_2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t kPrime64_3 = 0x165667B19E3779F9ull;
constexpr uint64_t kPrime64_4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t kPrime64_5 = 0x27D4EB2F165667C5ull;
constexpr uint32_t kStripeLen = 64;
constexpr uint32_t kSecretSize = 192;
constexpr uint32_t kStripesPerBlock = (kSecretSize - kStripeLen) / 8;  // 16
constexpr uint32_t kBlockLen = kStripeLen * kStripesPerBlock;          // 1024
constexpr uint32_t kMidSizeMax = 240;
constexpr unsigned kMaxThreads = 1024;

// XXH3_kSecret (xxhash.h), the default secret.
__constant__ uint8_t kSecret[kSecretSize] = {
    0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c,
    0xde, 0xd4, 0x6d, 0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f,
    0xcb, 0x79, 0xe6, 0x4e, 0xcc, 0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21,
    0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24, 0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c,
    0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88, 0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3,
    0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef, 0x46, 0xa9, 0xde, 0xac, 0xd8,
    0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7, 0x0b, 0x4f, 0x1d,
    0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73, 0x64,
    0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb,
    0x17, 0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e,
    0x2b, 0x16, 0xbe, 0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce,
    0x45, 0xcb, 0x3a, 0x8f, 0x95, 0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e,
};

// The same secret as little-endian 64-bit words: the long loop reads it only at multiples of 8.
__constant__ uint64_t kSecretWords[kSecretSize / 8] = {
    0xbe4ba423396cfeb8ull, 0x1cad21f72c81017cull, 0xdb979083e96dd4deull, 0x1f67b3b7a4a44072ull,
    0x78e5c0cc4ee679cbull, 0x2172ffcc7dd05a82ull, 0x8e2443f7744608b8ull, 0x4c263a81e69035e0ull,
    0xcb00c391bb52283cull, 0xa32e531b8b65d088ull, 0x4ef90da297486471ull, 0xd8acdea946ef1938ull,
    0x3f349ce33f76faa8ull, 0x1d4f0bc7c7bbdcf9ull, 0x3159b4cd4be0518aull, 0x647378d9c97e9fc8ull,
    0xc3ebd33483acc5eaull, 0xeb6313faffa081c5ull, 0x49daf0b751dd0d17ull, 0x9e68d429265516d3ull,
    0xfca1477d58be162bull, 0xce31d07ad1b8f88full, 0x280416958f3acb45ull, 0x7e404bbbcafbd7afull,
};

__device__ __forceinline__ uint64_t SecretLE64(uint32_t at) {
  uint64_t v = 0;
#pragma unroll
  for (int i = 7; i >= 0; --i) v = (v << 8) | kSecret[at + i];
  return v;
}
__device__ __forceinline__ uint32_t SecretLE32(uint32_t at) {
  return static_cast<uint32_t>(SecretLE64(at));  // the secret has 8 readable bytes past `at`
}

__device__ __forceinline__ uint64_t Rotl64(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
__device__ __forceinline__ uint64_t Swap64(uint64_t x) {
  uint64_t v = 0;
#pragma unroll
  for (int i = 0; i < 8; ++i) v = (v << 8) | ((x >> (8 * i)) & 0xff);
  return v;
}
__device__ __forceinline__ uint64_t Mul128Fold64(uint64_t a, uint64_t b) {
  return (a * b) ^ __umul64hi(a, b);
}
__device__ __forceinline__ uint64_t Mul32To64(uint64_t v) {
  return (v & 0xFFFFFFFFull) * (v >> 32);
}
__device__ __forceinline__ uint64_t Xxh64Avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}
__device__ __forceinline__ uint64_t Avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9ull;
  return h ^ (h >> 32);
}
__device__ __forceinline__ uint64_t Rrmxmx(uint64_t h, uint64_t len) {
  h ^= Rotl64(h, 49) ^ Rotl64(h, 24);
  h *= 0x9FB21C651E98DF25ull;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25ull;
  return h ^ (h >> 28);
}

// A contiguous payload at any alignment.
struct ContiguousSource {
  const unsigned char* base;
  __device__ uint64_t Load64(uint32_t off) const {
    const unsigned char* p = base + off;
    if (reinterpret_cast<uintptr_t>(p) % 8 == 0) return *reinterpret_cast<const uint64_t*>(p);
    uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
  }
  __device__ uint8_t Load8(uint32_t off) const { return base[off]; }
};

// A contiguous payload at an 8-byte aligned address.
struct AlignedSource {
  const unsigned char* base;
  __device__ uint64_t Load64(uint32_t off) const {  // off % 8 == 0
    return *reinterpret_cast<const uint64_t*>(base + off);
  }
  __device__ uint8_t Load8(uint32_t off) const { return base[off]; }
};

// One engine block of a paged KV cache read as its block-major payload. Every 8-byte word of the
// payload lies in one row (row_bytes is a multiple of 8) at an 8-byte aligned address.
struct PagedSource {
  ChecksumParams p;
  int64_t block;
  __device__ uint64_t Load64(uint32_t off) const {  // off % 8 == 0
    const uint32_t piece = off / p.piece_bytes;
    const uint32_t in_piece = off - piece * p.piece_bytes;
    const uint64_t base = p.layer_bases[piece] + block * p.block_stride;
    uint64_t addr = base + in_piece;
    if (!p.pieces_contiguous) {
      const uint32_t row = in_piece / p.row_bytes;
      const uint32_t col = in_piece - row * p.row_bytes;
      const uint32_t token = row / p.kv_heads;
      const uint32_t head = row - token * p.kv_heads;
      addr = base + token * p.token_stride + head * p.head_stride + col;
    }
    return *reinterpret_cast<const uint64_t*>(addr);
  }
  __device__ uint8_t Load8(uint32_t off) const {
    return static_cast<uint8_t>(Load64(off & ~7u) >> (8 * (off & 7)));
  }
};

template <class S>
__device__ uint64_t Unaligned64(const S& s, uint32_t off) {
  if (off % 8 == 0) return s.Load64(off);
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | s.Load8(off + i);
  return v;
}
template <class S>
__device__ uint32_t Unaligned32(const S& s, uint32_t off) {
  uint32_t v = 0;
  for (int i = 3; i >= 0; --i) v = (v << 8) | s.Load8(off + i);
  return v;
}

template <class S>
__device__ uint64_t Mix16B(const S& s, uint32_t off, uint32_t secret) {
  return Mul128Fold64(Unaligned64(s, off) ^ SecretLE64(secret),
                      Unaligned64(s, off + 8) ^ SecretLE64(secret + 8));
}

template <class S>
__device__ uint64_t Hash0To16(const S& s, uint32_t len) {
  if (len > 8) {
    const uint64_t lo = Unaligned64(s, 0) ^ (SecretLE64(24) ^ SecretLE64(32));
    const uint64_t hi = Unaligned64(s, len - 8) ^ (SecretLE64(40) ^ SecretLE64(48));
    return Avalanche(len + Swap64(lo) + hi + Mul128Fold64(lo, hi));
  }
  if (len >= 4) {
    const uint64_t in1 = Unaligned32(s, 0), in2 = Unaligned32(s, len - 4);
    const uint64_t keyed = (in2 + (in1 << 32)) ^ (SecretLE64(8) ^ SecretLE64(16));
    return Rrmxmx(keyed, len);
  }
  if (len > 0) {
    const uint32_t combined = (uint32_t{s.Load8(0)} << 16) | (uint32_t{s.Load8(len >> 1)} << 24) |
                              uint32_t{s.Load8(len - 1)} | (len << 8);
    return Xxh64Avalanche(uint64_t{combined} ^ (SecretLE32(0) ^ SecretLE32(4)));
  }
  return Xxh64Avalanche(SecretLE64(56) ^ SecretLE64(64));
}

template <class S>
__device__ uint64_t Hash17To128(const S& s, uint32_t len) {
  uint64_t acc = len * kPrime64_1;
  if (len > 32) {
    if (len > 64) {
      if (len > 96) acc += Mix16B(s, 48, 96) + Mix16B(s, len - 64, 112);
      acc += Mix16B(s, 32, 64) + Mix16B(s, len - 48, 80);
    }
    acc += Mix16B(s, 16, 32) + Mix16B(s, len - 32, 48);
  }
  acc += Mix16B(s, 0, 0) + Mix16B(s, len - 16, 16);
  return Avalanche(acc);
}

template <class S>
__device__ uint64_t Hash129To240(const S& s, uint32_t len) {
  uint64_t acc = len * kPrime64_1;
  for (uint32_t i = 0; i < 8; ++i) acc += Mix16B(s, 16 * i, 16 * i);
  acc = Avalanche(acc);
  for (uint32_t i = 8; i < len / 16; ++i) acc += Mix16B(s, 16 * i, 16 * (i - 8) + 3);
  acc += Mix16B(s, len - 16, 136 - 17);  // XXH3_SECRET_SIZE_MIN - XXH3_MIDSIZE_LASTOFFSET
  return Avalanche(acc);
}

template <class S>
__device__ uint64_t HashShort(const S& s, uint32_t len) {
  if (len <= 16) return Hash0To16(s, len);
  if (len <= 128) return Hash17To128(s, len);
  return Hash129To240(s, len);
}

__device__ __forceinline__ uint64_t InitAcc(uint32_t lane) {  // XXH3_INIT_ACC
  switch (lane) {
    case 0:
      return kPrime32_3;
    case 1:
      return kPrime64_1;
    case 2:
      return kPrime64_2;
    case 3:
      return kPrime64_3;
    case 4:
      return kPrime64_4;
    case 5:
      return kPrime32_2;
    case 6:
      return kPrime64_5;
    default:
      return kPrime32_1;
  }
}

// What `stripes` stripes from byte `at` add to accumulator `lane` (XXH3_accumulate_512, summed).
// `sw` is kSecretWords copied to shared memory (lanes read different words: constant memory would
// serialise them).
template <class S>
__device__ uint64_t StripesAdd(const S& s, uint32_t at, uint32_t stripes, uint32_t lane,
                               const uint64_t* sw) {
  uint64_t add = 0;
  for (uint32_t st = 0; st < stripes; ++st) {
    const uint32_t off = at + st * kStripeLen;
    const uint64_t mine = Unaligned64(s, off + 8 * lane);
    add += Unaligned64(s, off + 8 * (lane ^ 1)) + Mul32To64(mine ^ sw[st + lane]);
  }
  return add;
}

// `key` is the lane's scramble secret, kSecretWords[(kSecretSize - kStripeLen) / 8 + lane].
__device__ __forceinline__ uint64_t Scramble(uint64_t acc, uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * kPrime32_1;
}

// XXH3's long loop over one item by the whole thread block. Thread 0 gets the hash.
template <class S>
__device__ uint64_t HashLong(const S& s, uint32_t len, uint64_t* sums, uint64_t* accs,
                             const uint64_t* sw) {
  const uint32_t tid = threadIdx.x, lane = tid % 8, group = tid / 8, groups = blockDim.x / 8;
  const uint32_t blocks = (len - 1) / kBlockLen;
  uint64_t acc = InitAcc(lane);  // the running value, in threads 0-7
  const uint64_t scramble_key = sw[(kSecretSize - kStripeLen) / 8 + lane];
  for (uint32_t b0 = 0; b0 < blocks; b0 += groups) {
    const uint32_t b = b0 + group;
    sums[tid] = b < blocks ? StripesAdd(s, b * kBlockLen, kStripesPerBlock, lane, sw) : 0;
    __syncthreads();
    if (tid < 8) {
      const uint32_t n = min(groups, blocks - b0);
      for (uint32_t k = 0; k < n; ++k) acc = Scramble(acc + sums[8 * k + tid], scramble_key);
    }
    __syncthreads();
  }
  if (tid < 8) {
    const uint32_t done = blocks * kBlockLen;
    acc += StripesAdd(s, done, (len - 1 - done) / kStripeLen, tid, sw);
    const uint32_t last = len - kStripeLen;  // the last stripe, with the secret 7 bytes back
    const uint64_t mine = Unaligned64(s, last + 8 * tid);
    acc += Unaligned64(s, last + 8 * (tid ^ 1)) +
           Mul32To64(mine ^ SecretLE64(kSecretSize - kStripeLen - 7 + 8 * tid));
    accs[tid] = acc;
  }
  __syncthreads();
  uint64_t h = 0;
  if (tid == 0) {
    h = len * kPrime64_1;
    for (uint32_t i = 0; i < 4; ++i) {
      h += Mul128Fold64(accs[2 * i] ^ SecretLE64(11 + 16 * i),
                        accs[2 * i + 1] ^ SecretLE64(11 + 16 * i + 8));
    }
    h = Avalanche(h);
  }
  __syncthreads();  // accs and sums are free for the next item
  return h;
}

template <class S>
__device__ void HashItem(const S& s, uint32_t len, uint64_t* out, uint64_t* sums, uint64_t* accs,
                         const uint64_t* sw) {
  if (len <= kMidSizeMax) {
    if (threadIdx.x == 0) *out = HashShort(s, len);
    return;
  }
  const uint64_t h = HashLong(s, len, sums, accs, sw);
  if (threadIdx.x == 0) *out = h;
}

__global__ void ChecksumKernel(ChecksumParams p) {
  __shared__ uint64_t sums[kMaxThreads];
  __shared__ uint64_t accs[8];
  __shared__ uint64_t sw[kSecretSize / 8];
  for (uint32_t i = threadIdx.x; i < kSecretSize / 8; i += blockDim.x) sw[i] = kSecretWords[i];
  __syncthreads();
  for (uint32_t item = blockIdx.x; item < p.count; item += gridDim.x) {
    if (p.layer_bases == nullptr) {
      const auto* base = reinterpret_cast<const unsigned char*>(p.items[2 * item]);
      const auto len = static_cast<uint32_t>(p.items[2 * item + 1]);
      if (reinterpret_cast<uintptr_t>(base) % 8 == 0) {
        HashItem(AlignedSource{base}, len, &p.out[item], sums, accs, sw);
      } else {
        HashItem(ContiguousSource{base}, len, &p.out[item], sums, accs, sw);
      }
    } else {
      const PagedSource s{p, static_cast<int64_t>(p.items[item])};
      HashItem(s, p.payload_bytes, &p.out[item], sums, accs, sw);
    }
  }
}

}  // namespace

int PreloadChecksumKernel() {
  cudaFuncAttributes attributes;
  return static_cast<int>(
      cudaFuncGetAttributes(&attributes, reinterpret_cast<const void*>(&ChecksumKernel)));
}

int LaunchChecksum(const ChecksumParams& params, unsigned grid, unsigned threads, void* stream) {
  if (threads % 8 != 0 || threads > kMaxThreads) return static_cast<int>(cudaErrorInvalidValue);
  ChecksumKernel<<<grid, threads, 0, static_cast<cudaStream_t>(stream)>>>(params);
  return static_cast<int>(cudaGetLastError());
}

}  // namespace kvtier
