// Encoding and validating decoding of control-plane frames (wire_format.h FrameHeader, Hello,
// Welcome, Error; docs/protocol.md "Handshake").
//
// A frame is a 16-byte FrameHeader and payload_bytes of payload. Readers decode the header first
// (DecodeFrameHeader tells how many payload bytes follow, never more than kMaxFramePayload), then
// the payload with the decoder for its type. Decoders work on bytes already copied off the socket
// and validate everything: lengths, text sizes, reserved fields, the region layout. Errors are
// InvalidArgument (malformed) or FailedPrecondition (a version this side does not speak) with a
// message naming the field; no input crashes them.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "client/protocol/wire_format.h"
#include "common/status.h"
#include "index/namespace.h"

namespace kvtier::protocol {

struct FrameInfo {
  FrameType type = FrameType::kHello;
  uint16_t version = kProtocolVersion;
  uint32_t payload_bytes = 0;
};

// Client -> daemon: who I am and what I want.
struct Hello {
  Namespace ns;             // carried field by field; the daemon calls ns.Validate()
  std::string client_name;  // for the daemon's logs, e.g. "vllm-worker-3"
  uint32_t sq_entries = 0;  // 0: the daemon's default
  uint32_t cq_entries = 0;
  uint32_t arena_bytes = 0;
  // The memory pool asked for (since version 5); empty: the only pool this client may use (or,
  // allowed in several, the daemon's pool.name). The daemon refuses a pool the client's uid and
  // groups may not use.
  std::string pool{};
};

// Daemon -> client, with the kWelcomeFdCount file descriptors.
struct Welcome {
  uint64_t session_id = 0;
  uint64_t t1_bytes = 0;
  uint32_t t1_slot_bytes = 0;
  uint32_t t1_slots = 0;
  uint32_t max_batch = kMaxBatchKeys;
  RegionLayout layout{};
  // T0 (WelcomeT0): t0_bytes 0 means the daemon has none, and then the rest is empty/zero.
  uint64_t t0_bytes = 0;
  uint32_t t0_slot_bytes = 0;
  uint32_t t0_slots = 0;
  std::string t0_pci_bus_id{};  // at most kPciBusIdBytes - 1 bytes (EncodeWelcome cuts the rest)
  std::array<uint8_t, kT0IpcHandleBytes> t0_ipc_handle{};
};

struct ErrorFrame {
  absl::StatusCode code = absl::StatusCode::kUnknown;
  std::string message;
};

// Each returns a whole frame, header included. Text longer than the limits is refused by the
// decoder on the other side, so EncodeHello checks it here too (InvalidArgument); an error message
// is cut to kMaxErrorMessage bytes.
absl::StatusOr<std::vector<std::byte>> EncodeHello(const Hello& hello);
std::vector<std::byte> EncodeWelcome(const Welcome& welcome);
std::vector<std::byte> EncodeError(const ErrorFrame& error);

// `header` is the first sizeof(FrameHeader) bytes of a frame. Checks magic, type, reserved and
// the payload length; the version must be kProtocolVersion except for Error frames, whose layout
// is frozen so that a daemon can tell a client of another version why it is refused.
absl::StatusOr<FrameInfo> DecodeFrameHeader(absl::Span<const std::byte> header);
absl::StatusOr<Hello> DecodeHello(absl::Span<const std::byte> payload);
// Also validates the layout (ValidateLayout), the T1 geometry, max_batch and the T0 section (all
// zero without T0; with T0 a geometry that fits t0_bytes and a NUL-terminated, NUL-padded,
// printable, non-empty PCI bus id).
absl::StatusOr<Welcome> DecodeWelcome(absl::Span<const std::byte> payload);
absl::StatusOr<ErrorFrame> DecodeError(absl::Span<const std::byte> payload);

}  // namespace kvtier::protocol
