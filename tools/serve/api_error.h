// An error as an OpenAI client expects it: an HTTP status and the body
//   {"error": {"message": ..., "type": ..., "param": ... | null, "code": ... | null}}
// (the openai package raises BadRequestError, NotFoundError, RateLimitError, ... from the status
// and shows `message`). Errors are values: handlers return one instead of throwing.
#pragma once

#include <string>

namespace kvtier::serve {

struct ApiError {
  int status = 400;
  std::string message;                         // for a person; names the field and what is wrong
  std::string type = "invalid_request_error";  // OpenAI's error types
  std::string param;                           // the request field at fault ("" : null)
  std::string code;                            // a machine-readable code ("" : null)

  // The JSON body (always valid UTF-8: invalid bytes in the message are replaced).
  std::string Body() const;
};

ApiError MakeError(int status, std::string message, std::string type, std::string param = "",
                   std::string code = "");
// 400 naming `param`.
ApiError BadRequest(std::string param, std::string message, std::string code = "");
// 404 for a model this server does not serve.
ApiError ModelNotFound(const std::string& model, const std::string& served);

}  // namespace kvtier::serve
