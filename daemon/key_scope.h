// KeyScope: turns the block keys a client sends into the keys the daemon stores, so that a
// namespace's blocks can never be named, probed or read through the protocol by a client of
// another namespace (DESIGN.md "Trust and isolation").
//
// Clients hash tokens into keys chained from their namespace root (index/block_key.h), so two
// engines of one namespace send the same keys for the same prefix. Nothing stops a client from
// sending any 16 bytes, though, including keys it computed for a namespace it did not declare. The
// daemon therefore never uses a client's key as is: it stores
//
//   daemon_key = XXH3_128(bytes(client_key) ‖ bytes(namespace_root), secret)
//
// where namespace_root is the root of the namespace the connection declared and `secret` is a
// random 192-byte value of this daemon (kept beside the T2 data, so keys on disk stay valid across
// restarts). Without the secret no client can compute, or aim at, a daemon key of another
// namespace; same client key + same namespace = same daemon key, so sharing within a namespace
// works as before.
//
// A fleet. Daemons that share a remote tier (tiers/remote/) must derive the same daemon keys, so
// they share one secret: a file the operator makes once and copies to every host
// (daemon.key_scope_file, docs/configuration.md). Namespaces stay isolated exactly as on one
// host: the namespace root is still hashed into every key, under a secret no client sees.
//
// Thread-safety: const methods may be called concurrently.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/types/span.h"
#include "common/status.h"
#include "index/block_key.h"

namespace kvtier {

class KeyScope {
 public:
  static constexpr size_t kSecretBytes = 192;  // XXH3's default secret size
  using Secret = std::array<uint8_t, kSecretBytes>;

  // Reads the secret from `path`, or creates it there (mode 0600, random bytes from getrandom)
  // when the file does not exist and !must_exist (a shared secret is never made up by one
  // daemon: its fleet would silently stop sharing). An empty path: a fresh random secret for
  // this run only (no T2, nothing outlives the process). Errors name the path: missing (with
  // must_exist), unreadable, wrong size, not creatable.
  static absl::StatusOr<KeyScope> Load(const std::string& path, bool must_exist = false);
  explicit KeyScope(const Secret& secret) : secret_(secret) {}

  // The root a namespace with root `root` has in the pool named `pool` of a daemon with several
  // pools ([[pools]], config.h PoolPlan::pool_scoped_keys): XXH3_128(bytes(root) ‖ "kvtier-pool:"
  // ‖ pool). Scope() over it gives the same client key a different daemon key in each pool, so a
  // namespace of pool A never sees a block of pool B, even with the same namespace, in a store
  // both pools reach (the remote tier). Pure; no secret needed (Scope adds it).
  static BlockKey InPool(const BlockKey& root, std::string_view pool);

  // The daemon key of `client_key` in the namespace with root `root`.
  BlockKey Scope(const BlockKey& root, const BlockKey& client_key) const;
  // Scope() for each key; out.size() >= keys.size().
  void ScopeAll(const BlockKey& root, absl::Span<const BlockKey> keys,
                absl::Span<BlockKey> out) const;

 private:
  Secret secret_;
};

}  // namespace kvtier
