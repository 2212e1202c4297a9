// `kvtier serve`'s flags, parsed (serve_flags.cc declares them to CLI11; this header keeps CLI11
// out of its includers).
#pragma once

#include <cstdint>
#include <string>

namespace CLI {
class App;  // CLI/CLI.hpp: only the .cc files that build flags include it (it is slow to compile)
}  // namespace CLI

namespace kvtier::serve {

struct ServeFlags {
  std::string model;            // a Hugging Face model directory
  std::string device = "auto";  // "gpu", "cpu" or "auto", as `kvtier generate --device`
  std::string host = "127.0.0.1";
  uint16_t port = 8000;           // 0: any free port (the "serving on" line says which)
  std::string served_model_name;  // "": the model directory's name
  int32_t max_concurrent = 64;    // generation requests admitted at once; more get 429
  int64_t max_model_len = 0;      // 0: the model's max_position_embeddings
  int32_t max_running = 64;       // sequences in the engine's running batch
  int64_t max_step_tokens = 0;    // 0: the engine's default
  int64_t block_tokens = 16;      // tokens per KV block
  int32_t kv_blocks = 0;          // 0: enough for min(max_concurrent, max_running) full contexts,
                                  // at most 4096 blocks (at least one full context)
  bool no_prefix_caching = false;
  std::string daemon;  // kvtierd's socket: the KV lives in its T1 (CPU backend); "": a private pool
  // With --daemon: steps a running request that cannot grow waits for room before the latest
  // admission is preempted; and the lowest tier ("t0".."t3") a cached prefix is taken from.
  int32_t room_patience_steps = 16;
  std::string lowest_prefix_tier = "t3";
  int64_t max_body_bytes = 8 << 20;
  int32_t http_threads = 2;
  int32_t idle_timeout_s = 60;
  int32_t drain_timeout_s = 30;  // SIGTERM: how long requests in flight may take to finish  //
                                 // reading a request or writing a response; not a generation
};

// Adds the flags to `cmd`; CLI11 checks ranges (exit code 2 naming the flag).
void AddServeFlags(CLI::App* cmd, ServeFlags* flags);

}  // namespace kvtier::serve
