// RequestFramer against RFC 9112's framing rules: where a request ends, whatever pieces its bytes come in; what is
// refused and with which status; pipelined requests kept for the next one.
#include "serve/request_framer.h"

#include <gtest/gtest.h>

#include <string>

namespace seedling::serve {

namespace {
using State = RequestFramer::State;

// Feeds `bytes` one byte at a time (the worst split), returns the state at the end.
State feed_bytewise(RequestFramer& f, const std::string& bytes) {
  State st = f.state();
  for (char c : bytes) st = f.feed(std::string_view(&c, 1));
  return st;
}
}  // namespace

TEST(RequestFramer, AChunkedBodyFedByteByByteIsReframedWithAContentLength) {
  RequestFramer f(16384, 1024);
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
      "4;ext=1\r\nabcd\r\n3\r\nefg\r\n0\r\nTrailer: t\r\n\r\n";
  ASSERT_EQ(feed_bytewise(f, req), State::kComplete);
  EXPECT_EQ(f.request(), "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 7\r\n\r\nabcdefg");
  EXPECT_FALSE(f.close_after());
}

TEST(RequestFramer, PipelinedRequestsComeOutOneAfterAnother) {
  RequestFramer f(16384, 1024);
  ASSERT_EQ(f.feed("GET /a HTTP/1.1\r\nHost: x\r\n\r\nPOST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi"
                   "GET /c HTTP/1.0\r\n\r\n"),
            State::kComplete);
  EXPECT_EQ(f.request(), "GET /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
  ASSERT_EQ(f.next(), State::kComplete);
  EXPECT_EQ(f.request(), "POST /b HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
  ASSERT_EQ(f.next(), State::kComplete);
  EXPECT_TRUE(f.close_after());  // HTTP/1.0 without keep-alive
  EXPECT_EQ(f.next(), State::kNeedMore);
  EXPECT_FALSE(f.started());
}

TEST(RequestFramer, BodiesOverTheLimitAreRefusedBeforeTheyArrive) {
  RequestFramer by_length(16384, 100);
  EXPECT_EQ(by_length.feed("POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 101\r\n\r\n"), State::kRefused);
  EXPECT_EQ(by_length.refusal_status(), 413);
  RequestFramer chunked(16384, 100);
  EXPECT_EQ(chunked.feed("POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n50\r\n"), State::kNeedMore);
  EXPECT_EQ(chunked.feed(std::string(0x50, 'x') + "\r\n20\r\n"), State::kRefused);
  EXPECT_EQ(chunked.refusal_status(), 413);
  RequestFramer head(64, 100);
  EXPECT_EQ(head.feed("GET / HTTP/1.1\r\nHost: x\r\nX: " + std::string(100, 'y')), State::kRefused);
  EXPECT_EQ(head.refusal_status(), 431);
}

TEST(RequestFramer, WhatRfc9112RejectsIsRefusedWithItsStatus) {
  const std::string post = "POST / HTTP/1.1\r\nHost: x\r\n";
  const std::pair<std::string, int> cases[] = {
      {post + "Content-Length: 1\r\nContent-Length: 2\r\n\r\n", 400},
      {post + "Content-Length: -1\r\n\r\n", 400},
      {post + "Content-Length: 0x10\r\n\r\n", 400},
      {post + "Content-Length: 99999999999999999999\r\n\r\n", 400},
      {post + "Content-Length: 1\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {post + "Transfer-Encoding: gzip\r\n\r\n", 400},
      {post + "Transfer-Encoding: gzip, chunked\r\n\r\n", 501},
      {"POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\n\r\nfffffffffffffffff\r\n", 400},
      {post + "Transfer-Encoding: chunked\r\n\r\n2\r\nabc\r\n", 400},
      {post + " folded\r\n\r\n", 400},
      {post + "Bad Name: v\r\n\r\n", 400},
      {post + "X: a\rb\r\n\r\n", 400},
      {"GET / HTTP/1.1\r\n\r\n", 400},
      {post + "Host: y\r\n\r\n", 400},
      {"GET / HTTP/2.0\r\nHost: x\r\n\r\n", 505},
      {"GET /  HTTP/1.1\r\nHost: x\r\n\r\n", 400},
      {post + "Expect: magic\r\n\r\n", 417},
  };
  for (const auto& [bytes, status] : cases) {
    RequestFramer f(16384, 1 << 20);
    EXPECT_EQ(f.feed(bytes), State::kRefused) << bytes;
    EXPECT_EQ(f.refusal_status(), status) << bytes << f.refusal();
    EXPECT_FALSE(f.refusal().empty());
  }
}

TEST(RequestFramer, EqualContentLengthsAndExpectContinueAreAccepted) {
  RequestFramer f(16384, 1024);
  EXPECT_EQ(f.feed("\r\nPOST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2, 2\r\nContent-Length: 2\r\n"
                   "Expect: 100-continue\r\n\r\n"),
            State::kNeedMore);
  EXPECT_TRUE(f.wants_continue());
  f.continue_sent();
  EXPECT_FALSE(f.wants_continue());
  ASSERT_EQ(f.feed("ok"), State::kComplete);
  EXPECT_EQ(f.request(), "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nok");
}

// A chunk-size line of the longest length allowed (4096 bytes without its CRLF) frames the same whole or cut between
// its CR and LF: the cut one was refused as too long (tests/fuzz/fuzz_request_framer.cpp compares the two feeds).
TEST(RequestFramer, TheLongestChunkSizeLineIsAcceptedWhereverTheBytesAreCut) {
  const std::string head = "POST / HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n";
  const std::string size_line = "5;" + std::string(4094, 'e');
  const std::string expected = "POST / HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello";
  RequestFramer whole(16384, 1024);
  ASSERT_EQ(whole.feed(head + size_line + "\r\nhello\r\n0\r\n\r\n"), State::kComplete) << whole.refusal();
  EXPECT_EQ(whole.request(), expected);
  RequestFramer cut(16384, 1024);
  ASSERT_EQ(cut.feed(head + size_line + "\r"), State::kNeedMore) << cut.refusal();
  ASSERT_EQ(cut.feed("\nhello\r\n0\r\n\r\n"), State::kComplete);
  EXPECT_EQ(cut.request(), expected);
  RequestFramer longer(16384, 1024);
  EXPECT_EQ(longer.feed(head + size_line + "ee"), State::kRefused);
  EXPECT_EQ(longer.refusal_status(), 400);
}

}  // namespace seedling::serve
