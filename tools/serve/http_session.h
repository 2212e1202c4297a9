// One HTTP/1.1 connection of `kvtier serve`: requests read one after another (keep-alive), each
// routed to its endpoint:
//   GET  /health               200 {"status": "ok"}
//   GET  /metrics              Prometheus text (serve_metrics.h)
//   GET  /v1/models            the served model
//   POST /v1/completions       generation (generation_handler.h)
//   POST /v1/chat/completions  generation, through the chat template
// Anything else: 404 (unknown path) or 405 with Allow (known path, other method). Every byte is
// hostile: the header is read alone first (at most 16 KiB), a Content-Length over the body limit
// is answered 413 before a byte of the body is read (and the connection closed), a chunked body
// past the limit likewise; a bad request line closes the connection; a connection that takes more
// than --idle-timeout to send a request (an idle keep-alive one included) is closed; paths are
// escaped before they reach a log line.
#pragma once

#include "tools/serve/http_io.h"
#include "tools/serve/serve_context.h"

namespace kvtier::serve {

// Serves `socket` until the client closes it or a response ends the connection. Runs on the
// executor it was spawned on (a strand of its own).
asio::awaitable<void> ServeConnection(ServeContext& ctx, tcp::socket socket);

}  // namespace kvtier::serve
