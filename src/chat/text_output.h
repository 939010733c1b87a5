// chat/text_output.h - generated ids -> text a person reads: streamed detokenization, stop strings, and the
// reasoning of <think> ... </think> kept apart from the answer.
//
// Text is released only when it is final: never half a UTF-8 character (StreamDecoder), never the start of what
// may become a stop string or a think tag. When a stop string appears, the text before it is the last released.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "tokenizer/tokenizer.h"

namespace seedling {

class TextOutput {
 public:
  struct Piece {
    std::string reasoning;  // inside <think> ... </think>
    std::string content;    // the answer
  };

  // starts_in_reasoning: the prompt ended inside an open <think> (templates that open it for the model).
  // split_reasoning false: think tags are plain content (raw completions).
  TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, bool starts_in_reasoning,
             bool split_reasoning = true);

  Piece push(int32_t id);
  Piece finish();  // releases what was held back (nothing past a stop string)
  bool stopped() const { return stopped_; }
  const std::string& content() const { return content_; }
  const std::string& reasoning() const { return reasoning_; }

 private:
  Piece release(size_t end);

  StreamDecoder decoder_;
  std::vector<std::string> stops_;
  std::string text_;     // everything decoded so far
  size_t released_ = 0;  // text_[0, released_) has been handed out
  bool in_reasoning_;
  bool split_reasoning_;
  bool stopped_ = false;
  std::string content_, reasoning_;
};

// Length of the longest suffix of `text` that is a proper prefix of `word`: text to hold back while streaming.
size_t partial_suffix(std::string_view text, std::string_view word);

// True when `prompt` leaves a <think> block open (its last "<think>" comes after its last "</think>").
bool prompt_opens_reasoning(const std::string& prompt);

}  // namespace seedling
