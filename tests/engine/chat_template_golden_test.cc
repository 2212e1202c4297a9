// Chat templates of the real Qwen3, Qwen2.5, Llama 3.1 and Mistral Nemo tokenizer_config.json
// files rendered by the engine, against transformers 5.17's apply_chat_template(tokenize=False):
// system + user, multi-turn with assistant turns, add_generation_prompt true/false,
// enable_thinking, <think> in assistant turns, tools and tool calls, and a raise_exception().
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "engine/chat_template.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"

namespace kvtier::engine {
namespace {

using testing::DataDir;

class ChatTemplateGoldenTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ChatTemplateGoldenTest, RendersWhatTransformersRenders) {
  ASSERT_TRUE(testing::HaveTokenizer(GetParam()));
  auto tokenizer = Tokenizer::Load(testing::TokenizerDir(GetParam()));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto chat = ChatTemplate::FromTokenizer(**tokenizer);
  ASSERT_TRUE(chat.ok()) << chat.status();
  // Ordered: tojson must print the tools' keys in the order the file has them, as Python does.
  std::ifstream in(DataDir() / "chat_cases.json");
  const auto cases = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  const auto golden =
      testing::ReadJsonFile(DataDir() / "tokenizer_goldens" / (GetParam() + ".json"))["chat"];
  ASSERT_EQ(golden.size(), cases.size());
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    ChatOptions options;
    options.add_generation_prompt = c["add_generation_prompt"].get<bool>();
    if (c.contains("enable_thinking")) options.enable_thinking = c["enable_thinking"].get<bool>();
    if (c.contains("tools")) options.tools = c["tools"];
    auto text = chat->Render(c["messages"], options);
    const auto& expected = golden[name];
    if (expected.contains("error")) {
      ASSERT_FALSE(text.ok()) << name << " rendered, transformers raised " << expected["error"];
      const std::string want = expected["error"].get<std::string>();
      const std::string message = want.substr(want.find(": ") + 2);
      EXPECT_TRUE(absl::StrContains(std::string(text.status().message()), message))
          << name << ": " << text.status();
      continue;
    }
    ASSERT_TRUE(text.ok()) << name << ": " << text.status();
    EXPECT_EQ(*text, expected["text"].get<std::string>()) << GetParam() << " " << name;
  }
}

INSTANTIATE_TEST_SUITE_P(RealTemplates, ChatTemplateGoldenTest,
                         ::testing::ValuesIn(testing::kChatFamilies));

}  // namespace
}  // namespace kvtier::engine
