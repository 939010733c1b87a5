// Tool-call blocks parsed out of model text: Qwen3's JSON and Qwen3-Coder's XML forms, text around them kept, bad
// blocks kept as text, and streamed text cut anywhere giving the same content and calls as the text whole.
#include "serve/reply.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tokenizer/tokenizer.h"

namespace seedling::serve {

namespace {
ToolCallParser::Piece parse_in_pieces(const std::string& text, size_t cut) {
  ToolCallParser p;
  ToolCallParser::Piece all;
  for (size_t at = 0; at < text.size(); at += cut) {
    ToolCallParser::Piece x = p.push(std::string_view(text).substr(at, cut));
    all.content += x.content;
    all.calls.insert(all.calls.end(), x.calls.begin(), x.calls.end());
  }
  ToolCallParser::Piece x = p.finish();
  all.content += x.content;
  all.calls.insert(all.calls.end(), x.calls.begin(), x.calls.end());
  return all;
}
}  // namespace

TEST(ToolCalls, QwenJsonBlock) {
  auto c = parse_tool_call("\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", \"days\": 3}}\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->name, "get_weather");
  EXPECT_EQ(nlohmann::json::parse(c->arguments), nlohmann::json({{"city", "Paris"}, {"days", 3}}));
}

TEST(ToolCalls, QwenCoderXmlBlock) {
  auto c = parse_tool_call(
      "\n<function=run>\n<parameter=cmd>\nls -l\n</parameter>\n<parameter=timeout>\n30\n</parameter>\n</function>\n");
  ASSERT_TRUE(c.has_value());
  EXPECT_EQ(c->name, "run");
  EXPECT_EQ(nlohmann::json::parse(c->arguments), nlohmann::json({{"cmd", "ls -l"}, {"timeout", 30}}));
}

TEST(ToolCalls, NotACall) {
  EXPECT_FALSE(parse_tool_call("{\"arguments\": {}}").has_value());                  // no name
  EXPECT_FALSE(parse_tool_call("{\"name\": \"f\", \"arguments\": 3}").has_value());  // arguments not an object
  EXPECT_FALSE(parse_tool_call("{\"name\": \"f\"").has_value());                     // not JSON
  EXPECT_FALSE(parse_tool_call("<function=f>no end").has_value());
}

TEST(ToolCalls, TextAroundBlocksStreamedAnywhereEqualsWhole) {
  const std::string text =
      "Let me check. <tool_call>\n{\"name\": \"a\", \"arguments\": {\"x\": 1}}\n</tool_call>\n<tool_call>\n{\"name\": "
      "\"b\", \"arguments\": {}}\n</tool_call>";
  for (size_t cut = 1; cut <= text.size(); ++cut) {
    ToolCallParser::Piece got = parse_in_pieces(text, cut);
    EXPECT_EQ(got.content, "Let me check. ") << "cut " << cut;
    ASSERT_EQ(got.calls.size(), 2u) << "cut " << cut;
    EXPECT_EQ(got.calls[0].name, "a");
    EXPECT_EQ(got.calls[0].arguments, "{\"x\":1}");
    EXPECT_EQ(got.calls[1].name, "b");
  }
}

TEST(ToolCalls, BadBlockStaysTextAndLoneAnglesPass) {
  const std::string text = "a < b <tool_call>not json</tool_call> c <tool";
  for (size_t cut = 1; cut <= text.size(); ++cut) {
    ToolCallParser::Piece got = parse_in_pieces(text, cut);
    EXPECT_EQ(got.content, text) << "cut " << cut;
    EXPECT_TRUE(got.calls.empty());
  }
}

TEST(ToolCalls, UnterminatedBlockAtTheEnd) {
  // Cut off by max_tokens after a complete body: still a call. Cut off inside the body: text.
  ToolCallParser::Piece done = parse_in_pieces("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n", 5);
  ASSERT_EQ(done.calls.size(), 1u);
  EXPECT_EQ(done.content, "");
  ToolCallParser::Piece cut = parse_in_pieces("<tool_call>\n{\"name\": \"f\", \"argu", 5);
  EXPECT_TRUE(cut.calls.empty());
  EXPECT_EQ(cut.content, "<tool_call>\n{\"name\": \"f\", \"argu");
}

}  // namespace seedling::serve

namespace seedling::serve {

namespace {
struct Streamed {
  std::string reasoning, content;
  std::vector<ToolCall> calls;
  bool stopped = false;
};

// Feeds the ids of `text` one at a time and gathers the deltas, as the server does while streaming.
Streamed stream_text(const std::string& text, std::vector<std::string> stops, bool parse_tools, bool chat = true) {
  const Tokenizer tok =
      Tokenizer::from_file(find_tokenizer_file(std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe"));
  Reply r(tok, std::move(stops), false, parse_tools, chat);
  Streamed s;
  auto add = [&](const Reply::Delta& d) {
    s.reasoning += d.reasoning;
    s.content += d.content;
    s.calls.insert(s.calls.end(), d.calls.begin(), d.calls.end());
  };
  for (int32_t id : tok.encode(text, false)) add(r.push(id));
  add(r.finish());
  s.stopped = r.stopped();
  EXPECT_EQ(s.content, r.content());
  EXPECT_EQ(s.reasoning, r.reasoning());
  EXPECT_EQ(s.calls.size(), r.calls().size());
  return s;
}
}  // namespace

TEST(Reply, ReasoningContentAndToolCallsFromTokens) {
  const Streamed s = stream_text(
      "<think>\nthe user wants weather\n</think>\n\nChecking. <tool_call>\n{\"name\": \"get_weather\", "
      "\"arguments\": {\"city\": \"Paris\"}}\n</tool_call>",
      {}, true);
  EXPECT_EQ(s.reasoning, "\nthe user wants weather\n");
  EXPECT_EQ(s.content, "\n\nChecking. ");
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].name, "get_weather");
  EXPECT_EQ(s.calls[0].arguments, "{\"city\":\"Paris\"}");
}

TEST(Reply, WithoutToolsBlocksAreTextAndCompletionsKeepThinkTags) {
  const std::string text = "a <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call> <think>x</think> b";
  const Streamed chat = stream_text(text, {}, false);
  EXPECT_TRUE(chat.calls.empty());
  EXPECT_EQ(chat.content, "a <tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>  b");
  EXPECT_EQ(chat.reasoning, "x");
  const Streamed raw = stream_text(text, {}, true, /*chat=*/false);
  EXPECT_EQ(raw.content, text);
  EXPECT_TRUE(raw.calls.empty());
}

TEST(Reply, StopStringAcrossTokensEndsTheTextBeforeIt) {
  const Streamed s = stream_text("def f(x):\n    return x\n\n\ndef g(y):\n    pass\n", {"\n\n\ndef", "never"}, true);
  EXPECT_TRUE(s.stopped);
  EXPECT_EQ(s.content, "def f(x):\n    return x");
}

}  // namespace seedling::serve
