#include "chat/text_output.h"

#include <algorithm>

namespace seedling {

namespace {
constexpr std::string_view kOpen = "<think>";
constexpr std::string_view kClose = "</think>";
}  // namespace

size_t partial_suffix(std::string_view text, std::string_view word) {
  for (size_t n = std::min(text.size(), word.size() - 1); n > 0; --n) {
    if (text.substr(text.size() - n) == word.substr(0, n)) return n;
  }
  return 0;
}

bool prompt_opens_reasoning(const std::string& prompt) {
  const size_t open = prompt.rfind(kOpen);
  if (open == std::string::npos) return false;
  const size_t close = prompt.rfind(kClose);
  return close == std::string::npos || close < open;
}

TextOutput::TextOutput(const Tokenizer& tokenizer, std::vector<std::string> stop_strings, bool starts_in_reasoning,
                       bool split_reasoning)
    : decoder_(tokenizer, /*skip_special_tokens=*/true),
      in_reasoning_(starts_in_reasoning && split_reasoning),
      split_reasoning_(split_reasoning) {
  for (auto& s : stop_strings) {
    if (!s.empty()) stops_.push_back(std::move(s));
  }
}

TextOutput::Piece TextOutput::push(int32_t id) {
  if (stopped_) return {};
  text_ += decoder_.push(id);
  // A stop string anywhere in the unreleased text (it may begin in text released earlier only if it were held
  // back, which it was: released text never ends in a stop string's prefix).
  size_t stop_at = std::string::npos;
  for (const auto& s : stops_) {
    const size_t from = released_ >= s.size() ? released_ - s.size() + 1 : 0;
    const size_t at = text_.find(s, from);
    if (at != std::string::npos) stop_at = std::min(stop_at, at);
  }
  if (stop_at != std::string::npos) {
    stopped_ = true;
    return release(std::max(stop_at, released_));
  }
  size_t hold = split_reasoning_ ? std::max(partial_suffix(text_, kOpen), partial_suffix(text_, kClose)) : 0;
  for (const auto& s : stops_) hold = std::max(hold, partial_suffix(text_, s));
  return release(text_.size() - hold);
}

TextOutput::Piece TextOutput::finish() {
  if (stopped_) return {};
  text_ += decoder_.finish();
  return release(text_.size());
}

TextOutput::Piece TextOutput::release(size_t end) {
  Piece out;
  size_t i = released_;
  while (i < end) {
    const std::string_view tag = in_reasoning_ ? kClose : kOpen;
    const size_t at = split_reasoning_ ? text_.find(tag, i) : std::string::npos;
    const size_t stop = (at == std::string::npos || at + tag.size() > end) ? end : at;
    (in_reasoning_ ? out.reasoning : out.content).append(text_, i, stop - i);
    if (stop == end) {
      i = end;
      break;
    }
    in_reasoning_ = !in_reasoning_;
    i = at + tag.size();
  }
  released_ = std::max(i, end);
  content_ += out.content;
  reasoning_ += out.reasoning;
  return out;
}

}  // namespace seedling
