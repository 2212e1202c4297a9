// XXH3-64 compiled for AVX2 from the inlined xxhash.h (see checksum.h for why). Everything in
// this file is AVX2 code: only checksum.cc calls it, after checking the CPU.
#if defined(__x86_64__)
#pragma GCC target("avx2")
#include <immintrin.h>  // xxhash.h includes it only when the whole build targets AVX2
#define XXH_INLINE_ALL
#define XXH_VECTOR XXH_AVX2
#endif
#include <xxhash.h>

#include <cstddef>
#include <cstdint>

namespace kvtier {

uint64_t Xxh3Avx2(const void* data, size_t bytes) { return XXH3_64bits(data, bytes); }

namespace {

#if defined(__x86_64__)
// Copies with non-temporal (streaming) stores: the destination's cache lines are written whole
// without being read first, and do not push the source out of the cache. Against memcpy into memory
// that is not cached (a T1 slot), this moves about half the bytes over the memory bus (memcpy reads
// every destination line before writing it). `d` must be 32-byte aligned. Streaming stores are
// weakly ordered: the caller fences once it has copied everything (see CopyAndXxh3Avx2).
void StreamCopy(unsigned char* d, const unsigned char* s, size_t n) {
  for (; n >= 128; n -= 128, d += 128, s += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 96));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), a);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), b);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 64), c);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 96), e);
  }
  for (; n >= 32; n -= 32, d += 32, s += 32) {
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d),
                        _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s)));
  }
  __builtin_memcpy(d, s, n);
}

// xxhash.h's XXH3_accumulate_512_avx2 on two 32-byte halves of a stripe already in registers.
inline void Accumulate(__m256i* acc, __m256i data, const unsigned char* secret) {
  const __m256i key = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(secret));
  const __m256i data_key = _mm256_xor_si256(data, key);
  const __m256i data_key_lo = _mm256_shuffle_epi32(data_key, _MM_SHUFFLE(0, 3, 0, 1));
  const __m256i product = _mm256_mul_epu32(data_key, data_key_lo);
  const __m256i data_swap = _mm256_shuffle_epi32(data, _MM_SHUFFLE(1, 0, 3, 2));
  *acc = _mm256_add_epi64(product, _mm256_add_epi64(*acc, data_swap));
}

// One full XXH3 block (16 stripes): each stripe is loaded once, streamed to `d` (32-byte
// aligned) and folded into the accumulators from the same registers.
inline void StreamAndAccumulateBlock(xxh_u64* acc, unsigned char* d, const unsigned char* s,
                                     const unsigned char* secret, size_t stripes) {
  auto* a = reinterpret_cast<__m256i*>(acc);
  __m256i a0 = a[0], a1 = a[1];
  for (size_t i = 0; i < stripes; ++i, d += 64, s += 64, secret += XXH_SECRET_CONSUME_RATE) {
    const __m256i lo = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s));
    const __m256i hi = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + 32));
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d), lo);
    _mm256_stream_si256(reinterpret_cast<__m256i*>(d + 32), hi);
    Accumulate(&a0, lo, secret);
    Accumulate(&a1, hi, secret + 32);
  }
  a[0] = a0, a[1] = a1;
}
#endif

}  // namespace

// XXH3-64's long-input loop (xxhash.h's XXH3_hashLong_64b_internal with the default secret),
// with each 1 KiB block copied just before it is folded into the accumulators: the hash reads the
// block from L1, and no per-chunk streaming-state bookkeeping is paid (XXH3_64bits_update costs
// ~0.1 us a call, which is why chunked updates were slower than this for any chunk size).
// checksum_test pins the result to XXH3_64bits for lengths around every boundary.
uint64_t CopyAndXxh3Avx2(void* dst, const void* src, size_t bytes, bool stream) {
#if !defined(__x86_64__)
  // Never called there (checksum.cc checks for AVX2); keeps the file building off x86.
  __builtin_memcpy(dst, src, bytes);
  return XXH3_64bits(src, bytes);
#else
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const xxh_u8*>(src);
  if (bytes <= XXH3_MIDSIZE_MAX) {  // short inputs take other code paths in XXH3: copy, then hash
    __builtin_memcpy(d, s, bytes);
    return XXH3_64bits(s, bytes);
  }
  stream = stream && reinterpret_cast<uintptr_t>(d) % 32 == 0;  // else plain stores
  const xxh_u8* secret = XXH3_kSecret;
  constexpr size_t kSecretSize = sizeof(XXH3_kSecret);
  constexpr size_t kStripesPerBlock = (kSecretSize - XXH_STRIPE_LEN) / XXH_SECRET_CONSUME_RATE;
  constexpr size_t kBlockLen = XXH_STRIPE_LEN * kStripesPerBlock;
  XXH_ALIGN(XXH_ACC_ALIGN) xxh_u64 acc[XXH_ACC_NB] = XXH3_INIT_ACC;
  const size_t blocks = (bytes - 1) / kBlockLen;
  for (size_t n = 0; n < blocks; ++n) {
    if (stream) {
      StreamAndAccumulateBlock(acc, d + n * kBlockLen, s + n * kBlockLen, secret, kStripesPerBlock);
    } else {
      __builtin_memcpy(d + n * kBlockLen, s + n * kBlockLen, kBlockLen);
      XXH3_accumulate(acc, s + n * kBlockLen, secret, kStripesPerBlock, XXH3_accumulate_512_avx2);
    }
    XXH3_scrambleAcc_avx2(acc, secret + kSecretSize - XXH_STRIPE_LEN);
  }
  const size_t done = blocks * kBlockLen;  // the last, partial block: 1 to kBlockLen bytes
  if (stream) {
    StreamCopy(d + done, s + done, bytes - done);
  } else {
    __builtin_memcpy(d + done, s + done, bytes - done);
  }
  XXH3_accumulate(acc, s + done, secret, (bytes - 1 - done) / XXH_STRIPE_LEN,
                  XXH3_accumulate_512_avx2);
  constexpr size_t kLastAccStart = 7;  // XXH_SECRET_LASTACC_START
  XXH3_accumulate_512_avx2(acc, s + bytes - XXH_STRIPE_LEN,
                           secret + kSecretSize - XXH_STRIPE_LEN - kLastAccStart);
  if (stream) _mm_sfence();  // the streamed stores are visible before anything published after
  constexpr size_t kMergeAccsStart = 11;  // XXH_SECRET_MERGEACCS_START
  return XXH3_mergeAccs(acc, secret + kMergeAccsStart, static_cast<xxh_u64>(bytes) * XXH_PRIME64_1);
#endif
}

}  // namespace kvtier
