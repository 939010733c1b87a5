// TextOutput on the demo model's tokenizer: reasoning apart from the answer, stop strings cut the text, and the
// streamed pieces always add up to the decoded text.
#include "chat/text_output.h"

#include <gtest/gtest.h>

#include "test_util.h"

namespace seedling {

namespace {
Tokenizer demo_tokenizer() {
  return Tokenizer::from_file(std::string(SEEDLING_TEST_DATA) + "/../../models/seedling-demo-moe/tokenizer.json");
}

TextOutput::Piece feed_all(TextOutput& out, const std::vector<int32_t>& ids) {
  TextOutput::Piece all;
  for (int32_t id : ids) {
    const TextOutput::Piece p = out.push(id);
    all.reasoning += p.reasoning;
    all.content += p.content;
    if (out.stopped()) break;
  }
  const TextOutput::Piece p = out.finish();
  all.reasoning += p.reasoning;
  all.content += p.content;
  return all;
}
}  // namespace

TEST(TextOutput, ThinkBlockGoesToReasoningAndTagsAreDropped) {
  const Tokenizer tok = demo_tokenizer();
  TextOutput out(tok, {}, false);
  const TextOutput::Piece p = feed_all(out, tok.encode("<think>\nplan: loop</think>\n\nfor i in x:", false));
  EXPECT_EQ(p.reasoning, "\nplan: loop");
  EXPECT_EQ(p.content, "\n\nfor i in x:");
  EXPECT_EQ(out.content(), p.content);
}

TEST(TextOutput, PromptThatOpensThinkingStartsInReasoning) {
  const Tokenizer tok = demo_tokenizer();
  EXPECT_TRUE(prompt_opens_reasoning("<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning("<think>\n\n</think>\n\n"));
  TextOutput out(tok, {}, true);
  const TextOutput::Piece p = feed_all(out, tok.encode("idea</think>answer", false));
  EXPECT_EQ(p.reasoning, "idea");
  EXPECT_EQ(p.content, "answer");
}

TEST(TextOutput, StopStringEndsTheTextBeforeIt) {
  const Tokenizer tok = demo_tokenizer();
  TextOutput out(tok, {"return None", "zzz"}, false);
  const TextOutput::Piece p = feed_all(out, tok.encode("def f():\n    return None\n\nprint(1)", false));
  EXPECT_TRUE(out.stopped());
  EXPECT_EQ(p.content, "def f():\n    ");
}

TEST(TextOutput, WithoutStopsThePiecesAddUpToTheDecodedText) {
  const Tokenizer tok = demo_tokenizer();
  const std::string text = "x = '<thin' + 'k>' # r\xc3\xa9sum\xc3\xa9 \xe2\x9c\x93 \xe6\x95\xb0\n";
  const std::vector<int32_t> ids = tok.encode(text, false);
  TextOutput out(tok, {"never"}, false);
  const TextOutput::Piece p = feed_all(out, ids);
  EXPECT_EQ(p.reasoning, "");
  EXPECT_EQ(p.content, tok.decode(ids, true));
}

}  // namespace seedling
