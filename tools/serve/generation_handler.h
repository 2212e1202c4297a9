// POST /v1/completions and /v1/chat/completions: parse and check the body (api_request.h), refuse
// an unknown model (404) or a request past --max-concurrent (429), prepare the job
// (generation_job.h), hand it to the engine thread and answer from its RequestChannel: one JSON
// body when it ends, or server-sent events as text arrives ("data: {chunk}\n\n" ..., the usage
// chunk when asked, "data: [DONE]\n\n") over a chunked response.
//
// While the request runs, a watcher reads the socket: end of stream or an error there means the
// client left, and the request is cancelled in the engine (LlmEngine::Cancel) at once, streaming
// or not. Bytes that arrive instead (a pipelined request) are kept for the next read.
#pragma once

#include <memory>

#include "tools/serve/api_request.h"
#include "tools/serve/http_io.h"
#include "tools/serve/serve_context.h"

namespace kvtier::serve {

// Answers `req`; false when the connection ends.
asio::awaitable<bool> HandleGeneration(ServeContext& ctx, std::shared_ptr<Connection> conn,
                                       const Request& req, Endpoint endpoint, bool keep_alive);

}  // namespace kvtier::serve
