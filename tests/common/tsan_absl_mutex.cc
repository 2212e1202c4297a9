// ThreadSanitizer builds only (KVTIER_SANITIZE_THREAD): makes absl::Mutex visible to TSan.
//
// Debian's abseil is not built with -fsanitize=thread, so absl::Mutex's Lock and Unlock (out of
// line, in libabsl_synchronization.so) order nothing that TSan can see: every member a Mutex
// guards is reported as a race between the threads that take it. This file defines those entry
// points in the test executable, which the dynamic linker prefers to the library's; each calls
// the library's own (found with dlsym(RTLD_NEXT)) between the TSan mutex annotations that abseil
// itself makes when it is built with TSan (absl/base/internal/tsan_mutex_interface.h). TSan then
// treats an absl::Mutex like a pthread mutex: happens-before through lock and unlock, lock-order
// inversions (potential deadlocks) reported.
//
// Covered: Lock, Unlock, TryLock, ReaderLock, ReaderUnlock, ReaderTryLock, the destructor, and
// the calls that release and retake a mutex held exclusively inside them (Await*, LockWhen*,
// CondVar::Wait*). Not covered: ReaderLockWhen* and waits on a mutex held in reader mode.
#if !defined(__SANITIZE_THREAD__) && defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define __SANITIZE_THREAD__ 1
#endif
#endif
#ifndef __SANITIZE_THREAD__
#error "tsan_absl_mutex.cc belongs only in ThreadSanitizer builds"
#endif

#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <type_traits>

#include "absl/base/config.h"
#include "absl/synchronization/mutex.h"

// The mangled names below name abseil's inline namespace (Debian's is "debian3") as "S0_".
#if !ABSL_OPTION_USE_INLINE_NAMESPACE
#error "tsan_absl_mutex.cc expects abseil built with an inline namespace"
#endif

namespace {

// The library's definition of the member function whose mangled name, after the absl namespace,
// is `tail` (e.g. "5Mutex4LockEv" for absl::Mutex::Lock()). Aborts, naming it, when absent: an
// abseil whose ABI differs must not run silently unannotated.
template <typename Fn>
Fn Real(const char* tail) {
  const std::string ns = ABSL_INTERNAL_TOKEN_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + tail;
  void* fn = dlsym(RTLD_NEXT, name.c_str());
  if (fn == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found in abseil\n", name.c_str());
    std::abort();
  }
  return reinterpret_cast<Fn>(fn);
}

constexpr unsigned kRead = __tsan_mutex_read_lock;
constexpr unsigned kTry = __tsan_mutex_try_lock;
constexpr unsigned kTryFailed = __tsan_mutex_try_lock_failed;

// Runs `call` (which returns with `mu` taken in the mode `flags` says) as a lock acquisition.
template <typename Call>
auto Acquire(void* mu, unsigned flags, Call call) {
  __tsan_mutex_pre_lock(mu, flags);
  if constexpr (std::is_void_v<std::invoke_result_t<Call>>) {
    call();
    __tsan_mutex_post_lock(mu, flags, 0);
  } else {
    auto result = call();
    __tsan_mutex_post_lock(mu, flags, 0);
    return result;
  }
}

// Runs `call`, which may release `mu` (held exclusively) and retakes it before returning, as an
// unlock followed by a lock.
template <typename Call>
auto ReleaseAndRetake(void* mu, Call call) {
  __tsan_mutex_pre_unlock(mu, 0);
  __tsan_mutex_post_unlock(mu, 0);
  return Acquire(mu, 0, call);
}

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

Mutex::~Mutex() {
  static const auto real = Real<void (*)(Mutex*)>("5MutexD1Ev");
  __tsan_mutex_destroy(this, 0);
  real(this);
}

void Mutex::Lock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex4LockEv");
  Acquire(this, 0, [&] { real(this); });
}

void Mutex::ReaderLock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex10ReaderLockEv");
  Acquire(this, kRead, [&] { real(this); });
}

bool Mutex::TryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex7TryLockEv");
  __tsan_mutex_pre_lock(this, kTry);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, kTry | (locked ? 0 : kTryFailed), 0);
  return locked;
}

bool Mutex::ReaderTryLock() {
  static const auto real = Real<bool (*)(Mutex*)>("5Mutex13ReaderTryLockEv");
  __tsan_mutex_pre_lock(this, kRead | kTry);
  const bool locked = real(this);
  __tsan_mutex_post_lock(this, kRead | kTry | (locked ? 0 : kTryFailed), 0);
  return locked;
}

void Mutex::Unlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex6UnlockEv");
  __tsan_mutex_pre_unlock(this, 0);
  real(this);
  __tsan_mutex_post_unlock(this, 0);
}

void Mutex::ReaderUnlock() {
  static const auto real = Real<void (*)(Mutex*)>("5Mutex12ReaderUnlockEv");
  __tsan_mutex_pre_unlock(this, kRead);
  real(this);
  __tsan_mutex_post_unlock(this, kRead);
}

void Mutex::LockWhen(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex8LockWhenERKNS0_9ConditionE");
  Acquire(this, 0, [&] { real(this, cond); });
}

bool Mutex::LockWhenWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex19LockWhenWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return Acquire(this, 0, [&] { return real(this, cond, timeout); });
}

bool Mutex::LockWhenWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex20LockWhenWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return Acquire(this, 0, [&] { return real(this, cond, deadline); });
}

void Mutex::Await(const Condition& cond) {
  static const auto real =
      Real<void (*)(Mutex*, const Condition&)>("5Mutex5AwaitERKNS0_9ConditionE");
  ReleaseAndRetake(this, [&] { real(this, cond); });
}

bool Mutex::AwaitWithTimeout(const Condition& cond, Duration timeout) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Duration)>(
      "5Mutex16AwaitWithTimeoutERKNS0_9ConditionENS0_8DurationE");
  return ReleaseAndRetake(this, [&] { return real(this, cond, timeout); });
}

bool Mutex::AwaitWithDeadline(const Condition& cond, Time deadline) {
  static const auto real = Real<bool (*)(Mutex*, const Condition&, Time)>(
      "5Mutex17AwaitWithDeadlineERKNS0_9ConditionENS0_4TimeE");
  return ReleaseAndRetake(this, [&] { return real(this, cond, deadline); });
}

void CondVar::Wait(Mutex* mu) {
  static const auto real = Real<void (*)(CondVar*, Mutex*)>("7CondVar4WaitEPNS0_5MutexE");
  ReleaseAndRetake(mu, [&] { real(this, mu); });
}

bool CondVar::WaitWithTimeout(Mutex* mu, Duration timeout) {
  static const auto real = Real<bool (*)(CondVar*, Mutex*, Duration)>(
      "7CondVar15WaitWithTimeoutEPNS0_5MutexENS0_8DurationE");
  return ReleaseAndRetake(mu, [&] { return real(this, mu, timeout); });
}

bool CondVar::WaitWithDeadline(Mutex* mu, Time deadline) {
  static const auto real =
      Real<bool (*)(CondVar*, Mutex*, Time)>("7CondVar16WaitWithDeadlineEPNS0_5MutexENS0_4TimeE");
  return ReleaseAndRetake(mu, [&] { return real(this, mu, deadline); });
}

ABSL_NAMESPACE_END
}  // namespace absl
