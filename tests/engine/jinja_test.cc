// The chat-template interpreter (engine/jinja_*) on small templates, one feature each (whitespace
// control, loop variables, scoping, slicing, string methods, filters, tests, arithmetic, Python
// printing of values, macros, errors), against Jinja2 itself configured as transformers configures
// it (tests/engine/data/make_jinja_goldens.py wrote the expected text).
#include <fstream>
#include <string>

#include "engine/jinja_interpreter.h"
#include "engine/jinja_parser.h"
#include "gtest/gtest.h"
#include "tests/engine/golden_util.h"

namespace kvtier::engine::jinja {
namespace {

absl::StatusOr<std::string> Render(const std::string& source,
                                   const nlohmann::ordered_json& variables) {
  KVTIER_ASSIGN_OR_RETURN(std::vector<Stmt> program, Parse(source));
  Object vars;
  for (const auto& [k, v] : variables.items()) vars.emplace_back(k, Value::FromJson(v));
  Interpreter interpreter(vars);
  return interpreter.Render(program);
}

TEST(JinjaTest, RendersWhatJinja2Renders) {
  std::ifstream in(testing::DataDir() / "jinja_goldens.json");
  const auto cases = nlohmann::ordered_json::parse(in, nullptr, /*allow_exceptions=*/false);
  ASSERT_TRUE(cases.is_array() && !cases.empty());
  for (const auto& c : cases) {
    const std::string name = c["name"].get<std::string>();
    auto text = Render(c["template"].get<std::string>(), c["variables"]);
    if (c.contains("error")) {
      EXPECT_FALSE(text.ok()) << name << " rendered \"" << *text << "\"; Jinja2 raised "
                              << c["error"];
      continue;
    }
    ASSERT_TRUE(text.ok()) << name << ": " << text.status();
    EXPECT_EQ(*text, c["text"].get<std::string>()) << name;
  }
}

TEST(JinjaTest, RaiseExceptionCarriesTheTemplatesMessage) {
  auto text =
      Render("{{ raise_exception('roles must alternate') }}", nlohmann::ordered_json::object());
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(), "chat template line 1: template raised: roles must alternate");
}

TEST(JinjaTest, SyntaxErrorsNameTheLine) {
  for (const auto& [source, what] : std::vector<std::pair<std::string, std::string>>{
           {"a\n{% if x %}b", "line 2: missing \"{% endif %}\""},
           {"a\n\n{{ x + }}", "line 3: unexpected \"\" in an expression"},
           {"{% include 'x' %}", "line 1: unsupported or unexpected tag \"include\""},
           {"{{ 'abc }}", "line 1: unterminated string"},
           {"{% endfor %}", "line 1: unsupported or unexpected tag \"endfor\""}}) {
    auto program = Parse(source);
    ASSERT_FALSE(program.ok()) << source;
    EXPECT_NE(std::string(program.status().message()).find(what), std::string::npos)
        << source << " -> " << program.status();
  }
}

TEST(JinjaTest, RuntimeErrorsNameTheLine) {
  auto text = Render("ok\n{{ 1 + 'a' }}", nlohmann::ordered_json::object());
  ASSERT_FALSE(text.ok());
  EXPECT_EQ(text.status().message(),
            "chat template line 2: unsupported operand types for +: int and str");
}

}  // namespace
}  // namespace kvtier::engine::jinja
