// SEEDLING_DECODE_SKIP's parser (cuda/cuda_forward.h): host code, so these run without a GPU (in CI too).
#include <gtest/gtest.h>

#include <string>

#include "cuda/cuda_forward.h"
#include "test_util.h"

namespace seedling {

TEST(DecodeSkip, ListsGiveTheirLaunchesBits) {
  EXPECT_EQ(parse_decode_skips(""), 0u);
  EXPECT_EQ(parse_decode_skips("qkv"), unsigned(kSkipQkv));
  EXPECT_EQ(parse_decode_skips("router,gate_up,down"), unsigned(kSkipRouter | kSkipGateUp | kSkipDown));
  EXPECT_EQ(parse_decode_skips("qkv,attention,o,router,gate_up,down,head"), 127u);
  EXPECT_EQ(parse_decode_skips("head,"), unsigned(kSkipHead));  // a trailing comma ends the list
}

TEST(DecodeSkip, UnknownOrEmptyNamesAreOneClearError) {
  for (const char* bad : {"bogus", "qkv,bogus", "qkv,,down", ",qkv", "QKV", "gate-up"}) {
    const std::string e = test::error_of([&] { parse_decode_skips(bad); });
    EXPECT_NE(e.find("SEEDLING_DECODE_SKIP: '"), std::string::npos) << bad << ": " << e;
    EXPECT_NE(e.find("is not a decode launch (known: qkv, attention, o, router, gate_up, down, head)"),
              std::string::npos)
        << bad << ": " << e;
  }
  const std::string e = test::error_of([] { parse_decode_skips("qkv,bogus"); });
  EXPECT_NE(e.find("'bogus'"), std::string::npos) << e;
}

}  // namespace seedling
