#include "tools/serve/api_error.h"

#include <fmt/format.h>

#include <nlohmann/json.hpp>
#include <utility>

namespace kvtier::serve {

std::string ApiError::Body() const {
  auto null_if_empty = [](const std::string& s) {
    return s.empty() ? nlohmann::ordered_json(nullptr) : nlohmann::ordered_json(s);
  };
  const nlohmann::ordered_json body = {{"error",
                                        {{"message", message},
                                         {"type", type},
                                         {"param", null_if_empty(param)},
                                         {"code", null_if_empty(code)}}}};
  return body.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

ApiError MakeError(int status, std::string message, std::string type, std::string param,
                   std::string code) {
  return {.status = status,
          .message = std::move(message),
          .type = std::move(type),
          .param = std::move(param),
          .code = std::move(code)};
}

ApiError BadRequest(std::string param, std::string message, std::string code) {
  return {.status = 400,
          .message = std::move(message),
          .type = "invalid_request_error",
          .param = std::move(param),
          .code = std::move(code)};
}

ApiError ModelNotFound(const std::string& model, const std::string& served) {
  return {.status = 404,
          .message =
              fmt::format("The model '{}' does not exist; this server serves '{}'", model, served),
          .type = "invalid_request_error",
          .param = "model",
          .code = "model_not_found"};
}

}  // namespace kvtier::serve
