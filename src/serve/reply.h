// serve/reply.h - generated ids -> what an OpenAI reply carries: content, reasoning_content and tool calls.
//
// Reply runs TextOutput (streamed detokenization, stop strings, <think> separation) and then ToolCallParser over the
// content. Nothing is released that may still turn out to be the start of a stop string, a think tag or a tool-call
// block, so a streamed reply concatenates to exactly the non-streamed one.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "chat/text_output.h"

namespace seedling::serve {

struct ToolCall {
  std::string name;
  std::string arguments;  // a JSON object, as text (OpenAI's function.arguments)
};

// The body between <tool_call> and </tool_call> as a call: Qwen3's JSON {"name": ..., "arguments": {...}}, or
// Qwen3-Coder's <function=NAME><parameter=P>VALUE</parameter>...</function>. nullopt when it is neither.
std::optional<ToolCall> parse_tool_call(std::string_view body);

// Splits content text into plain text and <tool_call>...</tool_call> blocks, incrementally. A block that does not
// parse stays text, tags included; whitespace right after a block is dropped.
class ToolCallParser {
 public:
  struct Piece {
    std::string content;
    std::vector<ToolCall> calls;
  };
  Piece push(std::string_view text);
  Piece finish();  // an unterminated block is a call if its body parses, else text

 private:
  std::string buf_;
  bool inside_ = false;
  bool after_block_ = false;
};

class Reply {
 public:
  struct Delta {
    std::string reasoning, content;
    std::vector<ToolCall> calls;
    bool empty() const { return reasoning.empty() && content.empty() && calls.empty(); }
  };
  // chat false: raw completion text (think tags stay content, no tool calls).
  Reply(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, bool starts_in_reasoning, bool parse_tools,
        bool chat = true);
  Delta push(int32_t id);
  Delta finish();
  bool stopped() const { return text_.stopped(); }  // a stop string ended the text
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return text_.reasoning(); }
  const std::vector<ToolCall>& calls() const { return calls_; }

 private:
  Delta take(TextOutput::Piece p, bool last);

  TextOutput text_;
  bool parse_tools_;
  ToolCallParser tools_;
  std::string content_;
  std::vector<ToolCall> calls_;
};

}  // namespace seedling::serve
