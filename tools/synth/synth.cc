#include "tools/synth/synth.h"

#include <absl/container/flat_hash_map.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <iterator>
#include <utility>

#include "common/mix.h"
#include "tools/synth/synth_random.h"

namespace kvtier::synth {
namespace {

// Segment uids: a shared prompt or document has a fixed uid, every other text a fresh one.
constexpr uint64_t kPromptUid = uint64_t{1} << 60;
constexpr uint64_t kDocumentUid = uint64_t{2} << 60;
constexpr uint64_t kUniqueUid = uint64_t{3} << 60;

uint64_t Fmix(uint64_t x) { return SplitMix64Finalize(x); }

// A draw rounded down to whole tokens, within [1, max].
uint32_t Tokens(double draw, uint32_t max) {
  return static_cast<uint32_t>(std::clamp(draw, 1.0, static_cast<double>(max)));
}

// A run of tokens that appears as a unit: a system prompt, a document, a user turn, an answer.
// Different uids stand for different (random) token strings.
struct Segment {
  uint64_t uid;
  uint64_t start;  // token offset in the prompt
  uint32_t tokens;
};

// (parent id, block content) -> id, numbered in first-seen order. This is what makes ids
// prefix-chained: equal ids <=> equal content after an equal prefix.
class ChainInterner {
 public:
  uint64_t Id(uint64_t parent, uint64_t content) {
    return ids_.try_emplace(std::make_pair(parent, content), ids_.size()).first->second;
  }

 private:
  absl::flat_hash_map<std::pair<uint64_t, uint64_t>, uint64_t> ids_;
};

// A prompt that grows by appending, with the hash ids of its blocks.
class Context {
 public:
  void Clear() {
    segments_.clear();
    tokens_ = hashed_tokens_ = 0;
    ids_.clear();
  }
  void Append(uint64_t uid, uint32_t tokens) {
    segments_.push_back({uid, tokens_, tokens});
    tokens_ += tokens;
  }
  uint64_t tokens() const { return tokens_; }
  const std::vector<uint64_t>& ids() const { return ids_; }

  // Brings ids() up to date. Full blocks hashed before are unchanged by appending, so only the
  // blocks from the old partial one on are hashed again.
  void Hash(uint32_t block_tokens, ChainInterner* chains) {
    uint64_t keep = std::min<uint64_t>(hashed_tokens_ / block_tokens, ids_.size());
    ids_.resize(keep);
    uint64_t blocks = (tokens_ + block_tokens - 1) / block_tokens;
    size_t seg = 0;
    for (uint64_t b = keep; b < blocks; ++b) {
      uint64_t begin = b * block_tokens, end = std::min(begin + block_tokens, tokens_);
      uint64_t content = 0;
      for (uint64_t pos = begin; pos < end;) {  // fold in each segment piece the block covers
        while (segments_[seg].start + segments_[seg].tokens <= pos) ++seg;
        const Segment& s = segments_[seg];
        uint64_t piece_end = std::min<uint64_t>(end, s.start + s.tokens);
        content = Fmix(content ^ Fmix(s.uid));
        content = Fmix(content ^ ((pos - s.start) << 32 | (piece_end - s.start)));
        pos = piece_end;
      }
      uint64_t parent = b == 0 ? 0 : ids_[b - 1] + 1;  // 0: the root
      ids_.push_back(chains->Id(parent, content));
    }
    hashed_tokens_ = tokens_;
  }

 private:
  std::vector<Segment> segments_;
  uint64_t tokens_ = 0;
  uint64_t hashed_tokens_ = 0;
  std::vector<uint64_t> ids_;
};

// A chat conversation or an agent run.
struct Session {
  Context context;
  uint32_t pending_output = 0;  // the last answer, part of the next prompt
  bool open = false;
};

absl::Status Bad(const std::string& what) { return absl::InvalidArgumentError(what); }

}  // namespace

absl::Status SynthConfig::Validate() const {
  if (block_tokens == 0 || (block_tokens & (block_tokens - 1)) != 0 || block_tokens > (1u << 20)) {
    return Bad(
        fmt::format("--block-tokens must be a power of two up to 1048576, got {}", block_tokens));
  }
  for (auto [flag, value] : {std::pair{"--chat", chat_fraction}, std::pair{"--rag", rag_fraction},
                             std::pair{"--agent", agent_fraction}}) {
    if (!(value >= 0 && value <= 1e9)) {
      return Bad(fmt::format("{} must be a non-negative fraction, got {}", flag, value));
    }
  }
  if (chat_fraction + rag_fraction + agent_fraction <= 0) {
    return Bad("--chat, --rag and --agent are all 0: nothing to generate");
  }
  if (!(zipf_alpha >= 0 && zipf_alpha <= 10)) {
    return Bad(fmt::format("--zipf must be in [0, 10], got {}", zipf_alpha));
  }
  if (sessions == 0 || agents == 0 || system_prompts == 0 || documents == 0) {
    return Bad("--sessions, --agents, --system-prompts and --documents must be at least 1");
  }
  if (!(mean_turns >= 1 && mean_turns <= 1e9) ||
      !(mean_agent_steps >= 1 && mean_agent_steps <= 1e9)) {
    return Bad(fmt::format("--turns and --agent-steps must be at least 1, got {} and {}",
                           mean_turns, mean_agent_steps));
  }
  if (!(rate > 0 && rate <= 1e9)) return Bad(fmt::format("--rate must be positive, got {}", rate));
  if (max_context < 32768 || max_context > (1u << 30)) {
    return Bad(fmt::format("--max-context must be in [32768, 2^30] tokens, got {}", max_context));
  }
  return absl::OkStatus();
}

struct WorkloadGenerator::State {
  explicit State(const SynthConfig& c)
      : config(c),
        rng(c.seed),
        prompt_zipf(c.system_prompts, c.zipf_alpha),
        document_zipf(c.documents, c.zipf_alpha),
        chats(c.sessions),
        agents(c.agents) {
    double total = c.chat_fraction + c.rag_fraction + c.agent_fraction;
    chat_cut = c.chat_fraction / total;
    rag_cut = (c.chat_fraction + c.rag_fraction) / total;
    for (uint32_t i = 0; i < c.system_prompts; ++i) {
      prompt_tokens.push_back(Tokens(rng.LogUniform(200, 3000), 3000));
    }
    for (uint32_t i = 0; i < c.documents; ++i) {
      document_tokens.push_back(Tokens(rng.LogUniform(300, 6000), 6000));
    }
  }

  void AppendPrompt(Context* context) {
    size_t k = prompt_zipf.Sample(rng);
    context->Append(kPromptUid + k, prompt_tokens[k]);
  }
  void AppendUnique(Context* context, uint32_t tokens) {
    context->Append(kUniqueUid + next_uid++, tokens);
  }
  bool Fits(const Session& s, uint64_t more) const {
    return s.open && s.context.tokens() + s.pending_output + more <= config.max_context;
  }

  // Turn n: the previous prompt and answer, then new user text; a new session starts with a system
  // prompt.
  const Context& ChatTurn(uint32_t* output) {
    Session& s = chats[rng.Below(chats.size())];
    uint32_t user = Tokens(20 + rng.Exponential(250), 8000);
    if (Fits(s, user)) {
      AppendUnique(&s.context, s.pending_output);
    } else {
      s.context.Clear();
      AppendPrompt(&s.context);
      s.open = true;
    }
    AppendUnique(&s.context, user);
    *output = s.pending_output = Tokens(10 + rng.Exponential(300), 4000);
    s.context.Hash(config.block_tokens, &chains);
    if (rng.Chance(1 / config.mean_turns)) s.open = false;
    return s.context;
  }

  const Context& RagRequest(uint32_t* output) {
    rag.Clear();
    AppendPrompt(&rag);
    for (uint64_t n = 1 + rng.Below(4); n > 0; --n) {
      size_t d = document_zipf.Sample(rng);
      rag.Append(kDocumentUid + d, document_tokens[d]);
    }
    AppendUnique(&rag, Tokens(20 + rng.Exponential(100), 2000));
    *output = Tokens(10 + rng.Exponential(200), 2000);
    rag.Hash(config.block_tokens, &chains);
    return rag;
  }

  // A step re-reads the whole context after appending the last output and a tool observation.
  const Context& AgentStep(uint32_t* output) {
    Session& s = agents[rng.Below(agents.size())];
    uint32_t observation = Tokens(50 + rng.Exponential(600), 16000);
    if (Fits(s, observation)) {
      AppendUnique(&s.context, s.pending_output);
      AppendUnique(&s.context, observation);
    } else {
      s.context.Clear();
      AppendPrompt(&s.context);
      AppendUnique(&s.context, Tokens(rng.LogUniform(2000, 20000), 20000));  // the task
      s.open = true;
    }
    *output = s.pending_output = Tokens(20 + rng.Exponential(150), 2000);
    s.context.Hash(config.block_tokens, &chains);
    if (rng.Chance(1 / config.mean_agent_steps)) s.open = false;
    return s.context;
  }

  SynthConfig config;
  Rng rng;
  ZipfSampler prompt_zipf, document_zipf;
  std::vector<uint32_t> prompt_tokens, document_tokens;
  ChainInterner chains;
  std::vector<Session> chats, agents;
  Context rag;
  uint64_t next_uid = 0;
  double clock_ms = 0;
  double chat_cut = 0, rag_cut = 0;
};

WorkloadGenerator::WorkloadGenerator(const SynthConfig& config)
    : state_(std::make_unique<State>(config)) {}

WorkloadGenerator::~WorkloadGenerator() = default;

void WorkloadGenerator::Next(SynthRequest* request) {
  State& s = *state_;
  s.clock_ms += s.rng.Exponential(1000 / s.config.rate);
  request->timestamp_ms = static_cast<uint64_t>(s.clock_ms);
  double u = s.rng.Uniform();
  request->kind = u < s.chat_cut  ? RequestKind::kChat
                  : u < s.rag_cut ? RequestKind::kRag
                                  : RequestKind::kAgent;
  const Context& context = request->kind == RequestKind::kChat ? s.ChatTurn(&request->output_length)
                           : request->kind == RequestKind::kRag
                               ? s.RagRequest(&request->output_length)
                               : s.AgentStep(&request->output_length);
  request->input_length = static_cast<uint32_t>(context.tokens());
  request->hash_ids.assign(context.ids().begin(), context.ids().end());
}

void AppendMooncakeLine(const SynthRequest& request, std::string* out) {
  auto it = std::back_inserter(*out);
  fmt::format_to(
      it, "{{\"timestamp\": {}, \"input_length\": {}, \"output_length\": {}, \"hash_ids\": [",
      request.timestamp_ms, request.input_length, request.output_length);
  for (size_t i = 0; i < request.hash_ids.size(); ++i) {
    if (i > 0) out->append(", ");
    fmt::format_to(it, "{}", request.hash_ids[i]);
  }
  out->append("]}\n");
}

}  // namespace kvtier::synth
