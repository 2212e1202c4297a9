#define PCRE2_CODE_UNIT_WIDTH 8
#include "engine/regex.h"

#include <pcre2.h>

#include "engine/utf8.h"
#include "fmt/format.h"

namespace kvtier::engine {

struct Regex::Impl {
  pcre2_code* code = nullptr;
  bool jit = false;
  ~Impl() { pcre2_code_free(code); }
};

Regex::Regex(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
Regex::~Regex() = default;

absl::StatusOr<std::unique_ptr<Regex>> Regex::Compile(std::string_view pattern, bool literal) {
  int error = 0;
  PCRE2_SIZE offset = 0;
  const uint32_t options = PCRE2_UTF | PCRE2_UCP | (literal ? PCRE2_LITERAL : 0);
  auto impl = std::make_unique<Impl>();
  impl->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), options,
                             &error, &offset, nullptr);
  if (impl->code == nullptr) {
    PCRE2_UCHAR message[256];
    pcre2_get_error_message(error, message, sizeof(message));
    return absl::InvalidArgumentError(fmt::format("pre-tokenizer regex \"{}\": {} at offset {}",
                                                  pattern, reinterpret_cast<char*>(message),
                                                  offset));
  }
  // Without JIT (an unsupported CPU) the interpreter gives the same matches, only slower.
  impl->jit = pcre2_jit_compile(impl->code, PCRE2_JIT_COMPLETE) == 0;
  return std::unique_ptr<Regex>(new Regex(std::move(impl)));
}

absl::Status Regex::FindAll(std::string_view text,
                            absl::FunctionRef<void(size_t, size_t)> match) const {
  pcre2_match_data* data = pcre2_match_data_create_from_pattern(impl_->code, nullptr);
  const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
  absl::Status status;
  size_t start = 0;
  while (start < text.size()) {
    int rc = impl_->jit
                 ? pcre2_jit_match(impl_->code, subject, text.size(), start, 0, data, nullptr)
                 : PCRE2_ERROR_JIT_STACKLIMIT;
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      rc = pcre2_match(impl_->code, subject, text.size(), start, PCRE2_NO_UTF_CHECK, data, nullptr);
    }
    if (rc == PCRE2_ERROR_NOMATCH) break;
    if (rc < 0) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(rc, message, sizeof(message));
      status = absl::ResourceExhaustedError(fmt::format("pre-tokenizer regex failed at byte {}: {}",
                                                        start, reinterpret_cast<char*>(message)));
      break;
    }
    const PCRE2_SIZE* ovector = pcre2_get_ovector_pointer(data);
    const size_t begin = ovector[0], end = ovector[1];
    if (end > begin) {
      match(begin, end);
      start = end;
    } else {
      size_t next = begin;
      NextCodePoint(text, &next);
      start = next;
    }
  }
  pcre2_match_data_free(data);
  return status;
}

}  // namespace kvtier::engine
