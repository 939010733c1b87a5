// serve/request_framer.h - where one HTTP/1.1 request ends (RFC 9112 message framing), read before httplib sees it.
//
// Bytes come in as the socket gives them; the framer says when a whole request is there, or why it is refused, with
// the status to answer: 400 for framing RFC 9112 rejects (conflicting or malformed Content-Length, Transfer-Encoding
// with Content-Length, a coding other than chunked, a malformed chunk, obs-fold, no or two Host headers in
// HTTP/1.1), 413 as soon as the body is known to pass the limit (before reading it, for Content-Length; at the chunk
// that passes it, for chunked), 431 for a head over the limit, 501 for an unknown transfer coding, 505 for a version
// other than 1.0 and 1.1. A whole request is handed on re-framed with a Content-Length (chunks joined, no
// Transfer-Encoding, no Expect), so what reads it next never sees chunked bodies. Bytes after the request (pipelined
// requests) stay for the next one.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace seedling::serve {

class RequestFramer {
 public:
  enum class State { kNeedMore, kComplete, kRefused };

  RequestFramer(size_t max_head, size_t max_body) : max_head_(max_head), max_body_(max_body) {}

  // Appends bytes and frames as far as they go.
  State feed(std::string_view bytes);
  State state() const { return state_; }
  // Whether any byte of a request has come since the last one (an idle keep-alive connection has none).
  bool started() const { return !buf_.empty(); }
  // The head says `Expect: 100-continue` and the body has not come yet: the client waits for an interim 100.
  bool wants_continue() const { return expect_continue_ && !continue_sent_ && state_ == State::kNeedMore; }
  void continue_sent() { continue_sent_ = true; }

  // kComplete: the request as one Content-Length message, and whether the connection ends after it.
  const std::string& request() const { return request_; }
  bool close_after() const { return close_after_; }
  // kRefused: the status and why.
  int refusal_status() const { return refusal_status_; }
  const std::string& refusal() const { return refusal_; }

  // After kComplete: starts on the next request, with the bytes that came after this one; returns its state.
  State next();

 private:
  State refuse(int status, std::string why);
  State parse_head(size_t head_end);
  State read_body();
  State read_chunks();

  size_t max_head_, max_body_;
  std::string buf_;     // bytes of this request (and any after it) not yet consumed
  size_t pos_ = 0;      // bytes of buf_ consumed
  size_t scanned_ = 0;  // bytes of buf_ searched for the end of the head
  bool head_done_ = false;
  bool chunked_ = false;
  bool in_trailers_ = false;
  size_t content_length_ = 0;
  size_t chunk_left_ = 0;  // data bytes of the current chunk still to come (then its CRLF)
  bool chunk_data_ = false;
  bool expect_continue_ = false, continue_sent_ = false;
  bool close_after_ = false;
  std::string head_;  // request line and kept headers, each ending in CRLF
  std::string body_;
  std::string request_;
  State state_ = State::kNeedMore;
  int refusal_status_ = 0;
  std::string refusal_;
};

}  // namespace seedling::serve
