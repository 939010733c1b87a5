// The wire form of chat replies: a streamed reply's deltas, accumulated as OpenAI clients accumulate them (text
// appended, tool calls merged by index), equal the non-streamed message, tool calls and ids included.
#include "serve/api.h"

#include <gtest/gtest.h>

#include "tokenizer/tokenizer.h"

namespace seedling::serve {

using Json = nlohmann::ordered_json;

TEST(ChatWire, StreamedDeltasAccumulateToTheMessage) {
  const Tokenizer tok =
      Tokenizer::from_file(find_tokenizer_file(std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe"));
  const std::string text =
      "<think>two cities</think>Checking both.\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": "
      "\"Paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
      "</tool_call>";
  Reply r(tok, {}, false, true);
  int next_tool = 0;
  Json acc = {{"content", ""}, {"reasoning_content", ""}, {"tool_calls", Json::array()}};
  auto take = [&](const Reply::Delta& d) {
    if (d.empty()) return;
    const Json delta = chat_delta(d, &next_tool, "chatcmpl-1");
    if (delta.contains("content"))
      acc["content"] = acc["content"].get<std::string>() + delta["content"].get<std::string>();
    if (delta.contains("reasoning_content")) {
      acc["reasoning_content"] =
          acc["reasoning_content"].get<std::string>() + delta["reasoning_content"].get<std::string>();
    }
    for (const Json& c : delta.value("tool_calls", Json::array())) {
      const size_t i = c["index"].get<size_t>();
      ASSERT_EQ(i, acc["tool_calls"].size());  // each call arrives whole, in order
      Json whole = c;
      whole.erase("index");
      acc["tool_calls"].push_back(whole);
    }
  };
  for (int32_t id : tok.encode(text, false)) take(r.push(id));
  take(r.finish());
  const Json msg = chat_message(r, "chatcmpl-1");
  EXPECT_EQ(msg["role"], "assistant");
  EXPECT_EQ(acc["content"], msg["content"]);
  EXPECT_EQ(msg["content"], "Checking both.\n");
  EXPECT_EQ(acc["reasoning_content"], msg["reasoning_content"]);
  EXPECT_EQ(msg["reasoning_content"], "two cities");
  EXPECT_EQ(acc["tool_calls"], msg["tool_calls"]);
  ASSERT_EQ(msg["tool_calls"].size(), 2u);
  EXPECT_EQ(msg["tool_calls"][1]["function"]["arguments"], "{\"city\":\"Oslo\"}");
  EXPECT_NE(msg["tool_calls"][0]["id"], msg["tool_calls"][1]["id"]);
}

TEST(ChatWire, OnlyToolCallsMeansNullContent) {
  const Tokenizer tok =
      Tokenizer::from_file(find_tokenizer_file(std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe"));
  Reply r(tok, {}, false, true);
  for (int32_t id : tok.encode("<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>", false)) r.push(id);
  r.finish();
  const Json msg = chat_message(r, "x");
  EXPECT_TRUE(msg["content"].is_null());
  EXPECT_EQ(msg["tool_calls"][0]["function"]["name"], "f");
  EXPECT_EQ(msg["tool_calls"][0]["type"], "function");
}

}  // namespace seedling::serve
