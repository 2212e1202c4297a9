#include "tools/serve/serve_flags.h"

#include <CLI/CLI.hpp>

namespace kvtier::serve {

void AddServeFlags(CLI::App* cmd, ServeFlags* f) {
  cmd->add_option("--model", f->model,
                  "Hugging Face model directory (config.json, safetensors, tokenizer.json, "
                  "tokenizer_config.json)")
      ->required();
  cmd->add_option("--device", f->device,
                  "gpu (bf16/fp16), cpu (fp32), or auto: the GPU when there is one, else the CPU")
      ->check(CLI::IsMember({"auto", "cpu", "gpu"}))
      ->capture_default_str();
  cmd->add_option("--host", f->host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", f->port, "TCP port (0: any free port)")->capture_default_str();
  cmd->add_option("--served-model-name", f->served_model_name,
                  "The model's name in the API (default: the model directory's name)");
  cmd->add_option("--max-concurrent", f->max_concurrent,
                  "Generation requests in flight at most; more are answered 429")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--max-model-len", f->max_model_len,
                  "Tokens of one request at most, prompt and output (0: the model's context)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24))
      ->capture_default_str();
  cmd->add_option("--max-running", f->max_running, "Sequences in the engine's batch at most")
      ->check(CLI::Range(1, 1 << 16))
      ->capture_default_str();
  cmd->add_option("--max-step-tokens", f->max_step_tokens,
                  "Tokens computed per engine step at most (0: 512, or the backend's limit)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 20))
      ->capture_default_str();
  cmd->add_option("--block-tokens", f->block_tokens, "Tokens per KV block")
      ->check(CLI::IsMember({8, 16, 32, 64, 128}))
      ->capture_default_str();
  cmd->add_option("--kv-blocks", f->kv_blocks,
                  "KV blocks in the pool (0: min(max-concurrent, max-running) full contexts, at "
                  "most 4096 blocks, at least one context)")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  cmd->add_option("--daemon", f->daemon,
                  "kvtierd's socket: keep the KV cache in kvtierd (T1 for the CPU backend, T0 for "
                  "the GPU), attended in place, shared with every client of the daemon and kept "
                  "across restarts of this server; kvtierd's t1.slot_bytes must equal one block's "
                  "K/V (fp32 on the CPU, the model's dtype on the GPU; the error says how much)");
  cmd->add_option("--room-patience-steps", f->room_patience_steps,
                  "With --daemon: engine steps a running request that cannot grow waits for "
                  "kvtierd to make room before the latest admission is preempted (0: at once, as "
                  "a private pool does)")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  cmd->add_option("--lowest-prefix-tier", f->lowest_prefix_tier,
                  "With --daemon: the lowest tier a cached prefix is taken from; a block found "
                  "only below it is computed (t1: skip the disk where it reads slower than the "
                  "model computes)")
      ->check(CLI::IsMember({"t0", "t1", "t2", "t3"}))
      ->capture_default_str();
  cmd->add_flag("--no-prefix-caching", f->no_prefix_caching,
                "Compute every prompt in full (no reuse of cached prefix blocks)");
  cmd->add_option("--max-body-bytes", f->max_body_bytes, "Request bodies larger get 413")
      ->check(CLI::Range(int64_t{1024}, int64_t{1} << 30))
      ->capture_default_str();
  cmd->add_option("--idle-timeout", f->idle_timeout_s,
                  "Seconds a connection may take to send a request (or to read a response) "
                  "before it is closed; generation itself has no limit")
      ->check(CLI::Range(1, 86400))
      ->capture_default_str();
  cmd->add_option("--drain-timeout", f->drain_timeout_s,
                  "On SIGINT/SIGTERM, seconds the requests in flight may take to finish before "
                  "they are cancelled")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  cmd->add_option("--http-threads", f->http_threads, "I/O threads for HTTP")
      ->check(CLI::Range(1, 64))
      ->capture_default_str();
}

}  // namespace kvtier::serve
