#include "engine/rope_config.h"

#include <fmt/format.h>

#include <cmath>
#include <numbers>

namespace kvtier::engine {
namespace {

using Json = nlohmann::json;

absl::Status ReadLlama3(const JsonFields& p, RopeConfig* rope) {
  KVTIER_ASSIGN_OR_RETURN(rope->factor, p.PositiveNumber("factor"));
  KVTIER_ASSIGN_OR_RETURN(rope->low_freq_factor, p.PositiveNumber("low_freq_factor"));
  KVTIER_ASSIGN_OR_RETURN(rope->high_freq_factor, p.PositiveNumber("high_freq_factor"));
  KVTIER_ASSIGN_OR_RETURN(rope->original_max_position, p.Count("original_max_position_embeddings"));
  if (rope->high_freq_factor <= rope->low_freq_factor) {
    return p.Error(fmt::format(
        "llama3 rope: \"high_freq_factor\" {} must be greater than \"low_freq_factor\" {}",
        rope->high_freq_factor, rope->low_freq_factor));
  }
  return absl::OkStatus();
}

// `p` reads the object holding rope_type (rope_parameters or rope_scaling); `where` names it.
absl::Status ReadType(const JsonFields& p, const char* where, RopeConfig* rope) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<std::string> type, p.OptionalString("rope_type"));
  if (!type) {
    KVTIER_ASSIGN_OR_RETURN(type, p.OptionalString("type"));  // older spelling
  }
  if (!type || *type == "default") {
    rope->type = RopeConfig::Type::kDefault;
    return absl::OkStatus();
  }
  if (*type == "llama3") {
    rope->type = RopeConfig::Type::kLlama3;
    return ReadLlama3(p, rope);
  }
  return p.Error(fmt::format(
      "field \"{}\" has rope type \"{}\"; supported: \"default\", \"llama3\"", where, *type));
}

// Rotating only part of each head (partial_rotary_factor < 1, as in Phi or GLM) is another model.
absl::Status CheckFullRotary(const JsonFields& p, const char* where) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<double> partial, p.OptionalNumber("partial_rotary_factor"));
  if (partial && *partial != 1.0) {
    return p.Error(fmt::format("field \"{}partial_rotary_factor\" is {}; only 1 is supported",
                               where, *partial));
  }
  return absl::OkStatus();
}

absl::Status ReadNested(const JsonFields& f, const char* field, const JsonFields& nested,
                        RopeConfig* rope) {
  for (const auto& [key, value] : nested.json().items()) {
    if (value.is_object()) {
      return f.Error(fmt::format(
          "field \"{}\" holds per-layer-type parameters (\"{}\"); not supported", field, key));
    }
  }
  return ReadType(nested, field, rope);
}

}  // namespace

absl::Status ReadRopeConfig(const JsonFields& f, RopeConfig* rope) {
  KVTIER_ASSIGN_OR_RETURN(std::optional<double> top_theta, f.OptionalNumber("rope_theta"));
  const char* field = f.Has("rope_parameters") ? "rope_parameters" : "rope_scaling";
  if (f.Has(field) && !f.json()[field].is_object()) {
    return f.Error(
        fmt::format("field \"{}\" must be an object, got {}", field, f.json()[field].dump()));
  }
  const Json empty = Json::object();
  const Json& params = f.Has(field) ? f.json()[field] : empty;
  JsonFields nested(f.path(), params);
  KVTIER_RETURN_IF_ERROR(ReadNested(f, field, nested, rope));
  KVTIER_RETURN_IF_ERROR(CheckFullRotary(f, ""));
  KVTIER_RETURN_IF_ERROR(CheckFullRotary(nested, "rope_parameters."));
  KVTIER_ASSIGN_OR_RETURN(std::optional<double> inner_theta, nested.OptionalNumber("rope_theta"));
  if (inner_theta && top_theta && *inner_theta != *top_theta) {
    return f.Error(fmt::format("field \"rope_theta\" {} disagrees with \"{}\".rope_theta {}",
                               *top_theta, field, *inner_theta));
  }
  const std::optional<double> theta = inner_theta ? inner_theta : top_theta;
  if (!theta) return f.Error("field \"rope_theta\" is missing (nor in \"rope_parameters\")");
  if (*theta <= 1) {
    return f.Error(fmt::format("field \"rope_theta\" is {}; must be greater than 1", *theta));
  }
  rope->theta = *theta;
  return absl::OkStatus();
}

std::vector<float> RopeInvFreq(const RopeConfig& rope, uint32_t head_dim) {
  std::vector<float> inv_freq(head_dim / 2);
  for (uint32_t i = 0; i < head_dim / 2; ++i) {
    double f = 1.0 / std::pow(rope.theta, static_cast<double>(2 * i) / head_dim);
    if (rope.type == RopeConfig::Type::kLlama3) {
      const double old_len = rope.original_max_position;
      const double low_freq_wavelen = old_len / rope.low_freq_factor;
      const double high_freq_wavelen = old_len / rope.high_freq_factor;
      const double wavelen = 2 * std::numbers::pi / f;
      if (wavelen > low_freq_wavelen) {
        f /= rope.factor;
      } else if (wavelen >= high_freq_wavelen) {  // medium: interpolate
        const double smooth = (old_len / wavelen - rope.low_freq_factor) /
                              (rope.high_freq_factor - rope.low_freq_factor);
        f = (1 - smooth) * f / rope.factor + smooth * f;
      }
    }
    inv_freq[i] = static_cast<float>(f);
  }
  return inv_freq;
}

}  // namespace kvtier::engine
