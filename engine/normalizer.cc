#include "engine/normalizer.h"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/stringpiece.h>

#include "fmt/format.h"

namespace kvtier::engine {
namespace {

bool IsAscii(std::string_view text) {
  for (const char c : text) {
    if (static_cast<unsigned char>(c) >= 0x80) return false;
  }
  return true;
}

const icu::Normalizer2* IcuInstance(NormalForm form, UErrorCode* status) {
  switch (form) {
    case NormalForm::kNfc:
      return icu::Normalizer2::getNFCInstance(*status);
    case NormalForm::kNfd:
      return icu::Normalizer2::getNFDInstance(*status);
    case NormalForm::kNfkc:
      return icu::Normalizer2::getNFKCInstance(*status);
    case NormalForm::kNfkd:
      return icu::Normalizer2::getNFKDInstance(*status);
  }
  return nullptr;
}

std::string NormalizeWith(const icu::Normalizer2& n, std::string_view text) {
  UErrorCode status = U_ZERO_ERROR;
  const icu::StringPiece piece(text.data(), static_cast<int32_t>(text.size()));
  if (n.isNormalizedUTF8(piece, status) && U_SUCCESS(status)) return std::string(text);
  std::string out;
  icu::StringByteSink<std::string> sink(&out);
  status = U_ZERO_ERROR;
  n.normalizeUTF8(0, piece, sink, nullptr, status);
  // ICU fails only on invalid UTF-8 (callers validate first) or exhausted memory: keep the text.
  return U_SUCCESS(status) ? out : std::string(text);
}

}  // namespace

absl::StatusOr<NormalForm> ParseNormalForm(std::string_view type) {
  if (type == "NFC") return NormalForm::kNfc;
  if (type == "NFD") return NormalForm::kNfd;
  if (type == "NFKC") return NormalForm::kNfkc;
  if (type == "NFKD") return NormalForm::kNfkd;
  return absl::UnimplementedError(
      fmt::format("normalizer type \"{}\" is not supported (supported: NFC, NFD, NFKC, NFKD, "
                  "Sequence of them)",
                  type));
}

std::string Normalizer::Normalize(std::string_view text) const {
  std::string out(text);
  for (const NormalizerStep& step : steps_) {
    switch (step.kind) {
      case NormalizerStep::Kind::kForm: {
        if (IsAscii(out)) break;  // every normal form leaves ASCII unchanged
        UErrorCode status = U_ZERO_ERROR;
        const icu::Normalizer2* n = IcuInstance(step.form, &status);
        if (n != nullptr && U_SUCCESS(status)) out = NormalizeWith(*n, out);
        break;
      }
      case NormalizerStep::Kind::kPrepend:
        if (!out.empty()) out.insert(0, step.text);
        break;
      case NormalizerStep::Kind::kReplace: {
        if (step.text.empty()) break;
        std::string replaced;
        size_t begin = 0;
        for (size_t at = out.find(step.text); at != std::string::npos;
             at = out.find(step.text, begin)) {
          replaced.append(out, begin, at - begin).append(step.content);
          begin = at + step.text.size();
        }
        out = replaced.append(out, begin, std::string::npos);
        break;
      }
    }
  }
  return out;
}

}  // namespace kvtier::engine
