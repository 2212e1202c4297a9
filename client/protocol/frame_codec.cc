#include "client/protocol/frame_codec.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "client/protocol/region_layout.h"

namespace kvtier::protocol {
namespace {

absl::Status Invalid(std::string message) { return absl::InvalidArgumentError(std::move(message)); }

// `payload` is at most kMaxFramePayload bytes: every encoder bounds what it writes (Hello's texts
// are checked, Welcome is fixed-size, an Error's message is cut), so its size fits the u32 field.
std::vector<std::byte> Frame(FrameType type, absl::Span<const std::byte> payload) {
  FrameHeader h{kFrameMagic, kProtocolVersion, static_cast<uint16_t>(type),
                static_cast<uint32_t>(payload.size()), 0};
  std::vector<std::byte> out(sizeof(h) + payload.size());
  std::memcpy(out.data(), &h, sizeof(h));
  if (!payload.empty()) std::memcpy(out.data() + sizeof(h), payload.data(), payload.size());
  return out;
}

template <typename T>
void Append(std::vector<std::byte>* out, const T& value) {
  const auto* p = reinterpret_cast<const std::byte*>(&value);
  out->insert(out->end(), p, p + sizeof(T));
}

// Reads from a payload front to back; every read is bounds-checked and names the field.
class Reader {
 public:
  explicit Reader(absl::Span<const std::byte> bytes) : bytes_(bytes) {}

  template <typename T>
  absl::Status Fixed(const char* what, T* out) {
    if (bytes_.size() - pos_ < sizeof(T)) {
      return Invalid(fmt::format("{}: {} needs {} bytes at offset {}, payload has {}", frame_, what,
                                 sizeof(T), pos_, bytes_.size()));
    }
    std::memcpy(out, bytes_.data() + pos_, sizeof(T));
    pos_ += sizeof(T);
    return absl::OkStatus();
  }
  absl::Status Text(const char* what, uint32_t max_bytes, std::string* out) {
    uint16_t len = 0;
    KVTIER_RETURN_IF_ERROR(Fixed(what, &len));
    if (len > max_bytes || bytes_.size() - pos_ < len) {
      return Invalid(fmt::format("{}: {} of {} bytes at offset {} (limit {}, {} left)", frame_,
                                 what, len, pos_, max_bytes, bytes_.size() - pos_));
    }
    out->assign(reinterpret_cast<const char*>(bytes_.data() + pos_), len);
    pos_ += len;
    return absl::OkStatus();
  }
  absl::Status End() const {
    if (pos_ == bytes_.size()) return absl::OkStatus();
    return Invalid(
        fmt::format("{}: {} trailing bytes after offset {}", frame_, bytes_.size() - pos_, pos_));
  }
  void set_frame(const char* frame) { frame_ = frame; }

 private:
  absl::Span<const std::byte> bytes_;
  size_t pos_ = 0;
  const char* frame_ = "frame";
};

absl::Status CheckWelcome(const Welcome& w) {
  if (w.t1_slot_bytes == 0 || w.t1_slots == 0 ||
      w.t1_bytes / w.t1_slot_bytes < uint64_t{w.t1_slots}) {
    return Invalid(fmt::format("welcome: T1 of {} bytes cannot hold {} slots of {} bytes",
                               w.t1_bytes, w.t1_slots, w.t1_slot_bytes));
  }
  if (w.max_batch == 0 || w.max_batch > kMaxBatchKeys) {
    return Invalid(
        fmt::format("welcome: max_batch {} outside [1, {}]", w.max_batch, kMaxBatchKeys));
  }
  absl::Status layout = ValidateLayout(w.layout);
  if (!layout.ok()) return Invalid("welcome: " + std::string(layout.message()));
  return absl::OkStatus();
}

// Without T0 every byte of the section is zero; with it, the geometry fits and the bus id is a
// short printable NUL-terminated string padded with NULs (it names a GPU in clients' logs).
absl::Status CheckWelcomeT0(const WelcomeT0& t) {
  if (t.t0_bytes == 0) {
    const WelcomeT0 zero{};
    if (std::memcmp(&t, &zero, sizeof(t)) != 0) {
      return Invalid("welcome: no T0 (t0_bytes 0) but the T0 section is not all zero");
    }
    return absl::OkStatus();
  }
  if (t.t0_slot_bytes == 0 || t.t0_slots == 0 ||
      t.t0_bytes / t.t0_slot_bytes < uint64_t{t.t0_slots}) {
    return Invalid(fmt::format("welcome: T0 of {} bytes cannot hold {} slots of {} bytes",
                               t.t0_bytes, t.t0_slots, t.t0_slot_bytes));
  }
  const char* id = t.pci_bus_id;
  const size_t len = strnlen(id, kPciBusIdBytes);
  if (len == 0 || len == kPciBusIdBytes) {
    return Invalid(
        fmt::format("welcome: T0 PCI bus id is {}", len == 0 ? "empty" : "not NUL-terminated"));
  }
  for (size_t i = 0; i < kPciBusIdBytes; ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (i < len ? (c < 0x21 || c > 0x7e) : c != 0) {
      return Invalid(fmt::format("welcome: T0 PCI bus id has byte 0x{:02x} at {} ({})", c, i,
                                 i < len ? "not printable" : "padding is not NUL"));
    }
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<std::byte>> EncodeHello(const Hello& hello) {
  const Namespace& ns = hello.ns;
  const std::string* texts[kHelloTextFields] = {&ns.model_id, &ns.kv_layout,  &ns.dtype,
                                                &ns.lora_id,  &ns.cache_salt, &hello.client_name,
                                                &hello.pool};
  HelloFixed f{};
  f.block_tokens = ns.block_tokens;
  f.tp_rank = ns.tp_rank;
  f.tp_size = ns.tp_size;
  f.key_source = static_cast<uint8_t>(ns.key_source);
  f.sq_entries = hello.sq_entries;
  f.cq_entries = hello.cq_entries;
  f.arena_bytes = hello.arena_bytes;
  std::vector<std::byte> payload;
  Append(&payload, f);
  for (const std::string* t : texts) {
    if (t->size() > kMaxNameBytes) {
      return Invalid(
          fmt::format("hello: a text field of {} bytes (limit {})", t->size(), kMaxNameBytes));
    }
    Append(&payload, static_cast<uint16_t>(t->size()));  // <= kMaxNameBytes, checked above
    const auto* p = reinterpret_cast<const std::byte*>(t->data());
    payload.insert(payload.end(), p, p + t->size());
  }
  return Frame(FrameType::kHello, payload);
}

std::vector<std::byte> EncodeWelcome(const Welcome& w) {
  WelcomePayload p{};
  p.session_id = w.session_id;
  p.t1_bytes = w.t1_bytes;
  p.t1_slot_bytes = w.t1_slot_bytes;
  p.t1_slots = w.t1_slots;
  p.max_batch = w.max_batch;
  p.layout = w.layout;
  WelcomeT0 t0{};
  t0.t0_bytes = w.t0_bytes;
  t0.t0_slot_bytes = w.t0_slot_bytes;
  t0.t0_slots = w.t0_slots;
  std::memcpy(t0.pci_bus_id, w.t0_pci_bus_id.data(),
              std::min(w.t0_pci_bus_id.size(), kPciBusIdBytes - 1));
  std::memcpy(t0.ipc_handle, w.t0_ipc_handle.data(), kT0IpcHandleBytes);
  std::vector<std::byte> payload;
  Append(&payload, p);
  Append(&payload, t0);
  return Frame(FrameType::kWelcome, payload);
}

std::vector<std::byte> EncodeError(const ErrorFrame& e) {
  const size_t len = std::min<size_t>(e.message.size(), kMaxErrorMessage);
  std::vector<std::byte> payload;
  Append(&payload, ErrorFixed{static_cast<uint32_t>(e.code), static_cast<uint32_t>(len)});
  const auto* p = reinterpret_cast<const std::byte*>(e.message.data());
  payload.insert(payload.end(), p, p + len);
  return Frame(FrameType::kError, payload);
}

absl::StatusOr<FrameInfo> DecodeFrameHeader(absl::Span<const std::byte> header) {
  if (header.size() != sizeof(FrameHeader)) {
    return Invalid(
        fmt::format("frame header: {} bytes (expected {})", header.size(), sizeof(FrameHeader)));
  }
  FrameHeader h;
  std::memcpy(&h, header.data(), sizeof(h));
  if (h.magic != kFrameMagic) {
    return Invalid(
        fmt::format("frame header: bad magic 0x{:08x} (expected 0x{:08x})", h.magic, kFrameMagic));
  }
  if (h.type < static_cast<uint16_t>(FrameType::kHello) ||
      h.type > static_cast<uint16_t>(FrameType::kError)) {
    return Invalid(fmt::format("frame header: unknown frame type {}", h.type));
  }
  const auto type = static_cast<FrameType>(h.type);
  if (h.version == 0 || (h.version != kProtocolVersion && type != FrameType::kError)) {
    return absl::FailedPreconditionError(fmt::format(
        "frame header: protocol version {} (this side speaks {})", h.version, kProtocolVersion));
  }
  if (h.reserved != 0) return Invalid("frame header: reserved field is not zero");
  if (h.payload_bytes > kMaxFramePayload) {
    return Invalid(fmt::format("frame header: payload of {} bytes (limit {})", h.payload_bytes,
                               kMaxFramePayload));
  }
  return FrameInfo{type, h.version, h.payload_bytes};
}

absl::StatusOr<Hello> DecodeHello(absl::Span<const std::byte> payload) {
  Reader r(payload);
  r.set_frame("hello");
  HelloFixed f{};
  KVTIER_RETURN_IF_ERROR(r.Fixed("fixed fields", &f));
  if (f.reserved0[0] | f.reserved0[1] | f.reserved0[2] | f.reserved1) {
    return Invalid("hello: reserved fields are not zero");
  }
  if (f.key_source > static_cast<uint8_t>(KeySource::kEngineHash)) {
    return Invalid(fmt::format("hello: unknown key_source {}", f.key_source));
  }
  Hello h;
  h.ns.block_tokens = f.block_tokens;
  h.ns.tp_rank = f.tp_rank;
  h.ns.tp_size = f.tp_size;
  h.ns.key_source = static_cast<KeySource>(f.key_source);
  h.sq_entries = f.sq_entries;
  h.cq_entries = f.cq_entries;
  h.arena_bytes = f.arena_bytes;
  KVTIER_RETURN_IF_ERROR(r.Text("model_id", kMaxNameBytes, &h.ns.model_id));
  KVTIER_RETURN_IF_ERROR(r.Text("kv_layout", kMaxNameBytes, &h.ns.kv_layout));
  KVTIER_RETURN_IF_ERROR(r.Text("dtype", kMaxNameBytes, &h.ns.dtype));
  KVTIER_RETURN_IF_ERROR(r.Text("lora_id", kMaxNameBytes, &h.ns.lora_id));
  KVTIER_RETURN_IF_ERROR(r.Text("cache_salt", kMaxNameBytes, &h.ns.cache_salt));
  KVTIER_RETURN_IF_ERROR(r.Text("client_name", kMaxNameBytes, &h.client_name));
  KVTIER_RETURN_IF_ERROR(r.Text("pool", kMaxNameBytes, &h.pool));
  KVTIER_RETURN_IF_ERROR(r.End());
  return h;
}

absl::StatusOr<Welcome> DecodeWelcome(absl::Span<const std::byte> payload) {
  Reader r(payload);
  r.set_frame("welcome");
  WelcomePayload p{};
  WelcomeT0 t0{};
  KVTIER_RETURN_IF_ERROR(r.Fixed("payload", &p));
  KVTIER_RETURN_IF_ERROR(r.Fixed("T0 section", &t0));
  KVTIER_RETURN_IF_ERROR(r.End());
  if (p.reserved != 0) return Invalid("welcome: reserved field is not zero");
  Welcome w{p.session_id, p.t1_bytes, p.t1_slot_bytes, p.t1_slots, p.max_batch, p.layout};
  KVTIER_RETURN_IF_ERROR(CheckWelcome(w));
  KVTIER_RETURN_IF_ERROR(CheckWelcomeT0(t0));
  w.t0_bytes = t0.t0_bytes;
  w.t0_slot_bytes = t0.t0_slot_bytes;
  w.t0_slots = t0.t0_slots;
  w.t0_pci_bus_id.assign(t0.pci_bus_id, strnlen(t0.pci_bus_id, kPciBusIdBytes));
  std::memcpy(w.t0_ipc_handle.data(), t0.ipc_handle, kT0IpcHandleBytes);
  return w;
}

absl::StatusOr<ErrorFrame> DecodeError(absl::Span<const std::byte> payload) {
  Reader r(payload);
  r.set_frame("error");
  ErrorFixed f{};
  KVTIER_RETURN_IF_ERROR(r.Fixed("fixed fields", &f));
  if (f.message_bytes > kMaxErrorMessage || payload.size() - sizeof(f) != f.message_bytes) {
    return Invalid(fmt::format("error: message_bytes {} but {} bytes follow (limit {})",
                               f.message_bytes, payload.size() - sizeof(f), kMaxErrorMessage));
  }
  ErrorFrame e;
  // Codes this side does not know are kept as kUnknown; the message still says what happened.
  e.code = f.code <= static_cast<uint32_t>(absl::StatusCode::kUnauthenticated)
               ? static_cast<absl::StatusCode>(f.code)
               : absl::StatusCode::kUnknown;
  e.message.assign(reinterpret_cast<const char*>(payload.data() + sizeof(f)), f.message_bytes);
  return e;
}

}  // namespace kvtier::protocol
