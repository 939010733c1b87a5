#include "serve/request_framer.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <vector>

namespace seedling::serve {

namespace {

std::string lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// The elements of a comma-separated header list, trimmed; empty elements dropped (RFC 9110 5.6.1).
std::vector<std::string_view> list_elements(std::string_view v) {
  std::vector<std::string_view> out;
  size_t at = 0;
  while (at <= v.size()) {
    const size_t comma = std::min(v.find(',', at), v.size());
    const std::string_view e = trim(v.substr(at, comma - at));
    if (!e.empty()) out.push_back(e);
    at = comma + 1;
  }
  return out;
}

// RFC 9110 5.6.2: a token is one or more tchar.
bool is_token(std::string_view s) {
  static constexpr std::string_view kExtra = "!#$%&'*+-.^_`|~";
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || kExtra.find(c) != std::string_view::npos;
  });
}

// A field value may hold visible characters, spaces, tabs and obs-text; never CR, LF, NUL or other controls.
bool is_field_value(std::string_view s) {
  return std::all_of(s.begin(), s.end(),
                     [](char c) {
                       const auto u = static_cast<unsigned char>(c);
                       return u == '\t' || u >= 0x20;
                     }) &&
         s.find('\x7f') == std::string_view::npos;
}

}  // namespace

RequestFramer::State RequestFramer::refuse(int status, std::string why) {
  state_ = State::kRefused;
  refusal_status_ = status;
  refusal_ = std::move(why);
  return state_;
}

RequestFramer::State RequestFramer::feed(std::string_view bytes) {
  buf_.append(bytes);
  if (state_ != State::kNeedMore) return state_;
  if (!head_done_) {
    // RFC 9112 2.2: empty lines before the request line are ignored.
    while (pos_ < buf_.size() &&
           (buf_[pos_] == '\n' || (buf_[pos_] == '\r' && pos_ + 1 < buf_.size() && buf_[pos_ + 1] == '\n'))) {
      pos_ += buf_[pos_] == '\r' ? 2 : 1;
    }
    if (pos_ > 0) {
      buf_.erase(0, pos_);
      pos_ = 0;
      scanned_ = 0;
    }
    // The head ends at the first empty line: "\n\n" or "\n\r\n".
    size_t end = std::string::npos;
    for (size_t i = std::max<size_t>(scanned_, 1); i < buf_.size() && end == std::string::npos; ++i) {
      if (buf_[i] != '\n') continue;
      if (buf_[i - 1] == '\n') end = i + 1;
      if (i >= 2 && buf_[i - 1] == '\r' && buf_[i - 2] == '\n') end = i + 1;
    }
    if (end == std::string::npos) {
      scanned_ = buf_.size();
      if (buf_.size() > max_head_) {
        return refuse(431, fmt::format("the request head is longer than {} bytes", max_head_));
      }
      return state_;
    }
    if (end > max_head_) return refuse(431, fmt::format("the request head is longer than {} bytes", max_head_));
    if (parse_head(end) != State::kNeedMore) return state_;
  }
  return chunked_ ? read_chunks() : read_body();
}

RequestFramer::State RequestFramer::parse_head(size_t head_end) {
  std::vector<std::string_view> lines;
  const std::string_view head(buf_.data(), head_end);
  for (size_t at = 0; at < head.size();) {
    const size_t nl = head.find('\n', at);
    std::string_view line = head.substr(at, nl - at);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find('\r') != std::string_view::npos) return refuse(400, "a bare CR in the request head");
    if (line.find('\0') != std::string_view::npos) return refuse(400, "a NUL byte in the request head");
    if (!line.empty()) lines.push_back(line);
    at = nl + 1;
  }
  if (lines.empty()) return refuse(400, "no request line");
  // The request line: method SP request-target SP HTTP-version.
  const std::string_view rl = lines.front();
  const size_t sp1 = rl.find(' ');
  const size_t sp2 = sp1 == std::string_view::npos ? sp1 : rl.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || rl.find(' ', sp2 + 1) != std::string_view::npos) {
    return refuse(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
  }
  const std::string_view method = rl.substr(0, sp1), target = rl.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = rl.substr(sp2 + 1);
  if (!is_token(method) || target.empty() || !is_field_value(target) || target.find('\t') != std::string_view::npos) {
    return refuse(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
  }
  const bool http11 = version == "HTTP/1.1";
  if (!http11 && version != "HTTP/1.0") {
    const bool shaped = version.size() == 8 && version.substr(0, 5) == "HTTP/" && std::isdigit(version[5]) &&
                        version[6] == '.' && std::isdigit(version[7]);
    if (shaped) return refuse(505, fmt::format("{} is not supported: HTTP/1.1 or HTTP/1.0", version));
    return refuse(400, "the request line is not 'METHOD TARGET HTTP/1.1'");
  }

  head_.assign(rl);
  head_ += "\r\n";
  int hosts = 0;
  bool has_length = false, keep_alive = false;
  std::vector<std::string> codings;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    if (line.front() == ' ' || line.front() == '\t') return refuse(400, "obsolete line folding in the request head");
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos || !is_token(line.substr(0, colon))) {
      return refuse(400, fmt::format("a malformed header line (no 'NAME: value'), line {}", i + 1));
    }
    const std::string name = lower(line.substr(0, colon));
    const std::string_view value = trim(line.substr(colon + 1));
    if (!is_field_value(value)) return refuse(400, fmt::format("header '{}' holds a control character", name));
    if (name == "content-length") {
      // A list of equal values is one value (RFC 9110 8.6); different ones, or anything but digits, are refused.
      for (std::string_view v : list_elements(value)) {
        if (v.size() > 18 || !std::all_of(v.begin(), v.end(), [](char c) { return c >= '0' && c <= '9'; })) {
          return refuse(400, fmt::format("Content-Length '{}' is not a number of bytes", v));
        }
        const size_t n = std::stoull(std::string(v));
        if (has_length && n != content_length_) {
          return refuse(400, fmt::format("conflicting Content-Length values {} and {}", content_length_, n));
        }
        content_length_ = n;
        has_length = true;
      }
      if (list_elements(value).empty()) return refuse(400, "an empty Content-Length");
      continue;
    }
    if (name == "transfer-encoding") {
      for (std::string_view c : list_elements(value)) codings.push_back(lower(c));
      continue;
    }
    if (name == "expect") {
      if (lower(value) != "100-continue") return refuse(417, fmt::format("Expect '{}' cannot be met", value));
      expect_continue_ = true;
      continue;
    }
    if (name == "host") ++hosts;
    if (name == "connection") {
      for (std::string_view t : list_elements(value)) {
        close_after_ = close_after_ || lower(t) == "close";
        keep_alive = keep_alive || lower(t) == "keep-alive";
      }
    }
    head_.append(line);
    head_ += "\r\n";
  }
  if (!http11 && !keep_alive) close_after_ = true;
  if (hosts > 1 || (http11 && hosts == 0)) {
    return refuse(400, hosts ? "more than one Host header" : "an HTTP/1.1 request without a Host header");
  }
  if (!codings.empty()) {
    if (!http11) return refuse(400, "Transfer-Encoding in an HTTP/1.0 request");
    if (has_length) return refuse(400, "both Transfer-Encoding and Content-Length");
    if (codings.back() != "chunked") return refuse(400, "the last transfer coding is not chunked");
    if (codings.size() > 1) return refuse(501, "transfer codings other than chunked are not supported");
    chunked_ = true;
  }
  if (content_length_ > max_body_) {
    return refuse(413, fmt::format("the request body is larger than the limit of {} bytes", max_body_));
  }
  head_done_ = true;
  pos_ = head_end;
  return state_;
}

RequestFramer::State RequestFramer::read_body() {
  if (buf_.size() - pos_ < content_length_) return state_;
  body_.assign(buf_, pos_, content_length_);
  pos_ += content_length_;
  request_ = head_ + fmt::format("Content-Length: {}\r\n\r\n", body_.size()) + body_;
  body_.clear();
  state_ = State::kComplete;
  return state_;
}

RequestFramer::State RequestFramer::read_chunks() {
  constexpr size_t kMaxLine = 4096;  // a chunk-size line with its extensions, or a trailer line
  while (state_ == State::kNeedMore) {
    if (chunk_data_) {
      const size_t take = std::min(chunk_left_, buf_.size() - pos_);
      body_.append(buf_, pos_, take);
      pos_ += take;
      chunk_left_ -= take;
      if (chunk_left_ > 0 || pos_ == buf_.size()) break;
      if (buf_[pos_] == '\n') {
        pos_ += 1;
      } else if (buf_[pos_] == '\r') {
        if (pos_ + 1 == buf_.size()) break;
        if (buf_[pos_ + 1] != '\n') return refuse(400, "a chunk is longer than its size");
        pos_ += 2;
      } else {
        return refuse(400, "a chunk is longer than its size");
      }
      chunk_data_ = false;
      continue;
    }
    const size_t nl = buf_.find('\n', pos_);
    if (nl == std::string::npos) {
      // kMaxLine bytes and the CR of their CRLF may be here without the LF: the line is not too long yet.
      if (buf_.size() - pos_ > kMaxLine + 1) return refuse(400, "a chunk-size or trailer line is too long");
      break;
    }
    std::string_view line(buf_.data() + pos_, nl - pos_);
    pos_ = nl + 1;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.size() > kMaxLine || !is_field_value(line)) return refuse(400, "a malformed chunk-size or trailer line");
    if (in_trailers_) {
      if (line.empty()) {
        request_ = head_ + fmt::format("Content-Length: {}\r\n\r\n", body_.size()) + body_;
        body_.clear();
        state_ = State::kComplete;
      }
      continue;  // trailer fields are dropped
    }
    size_t digits = 0, size = 0;
    while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
      if (digits == 15) return refuse(400, "a chunk size too large");
      const char c = char(std::tolower(static_cast<unsigned char>(line[digits])));
      size = size * 16 + size_t(c <= '9' ? c - '0' : c - 'a' + 10);
      ++digits;
    }
    const std::string_view rest = trim(line.substr(digits));
    if (digits == 0 || (!rest.empty() && rest.front() != ';')) return refuse(400, "a malformed chunk size");
    if (size == 0) {
      in_trailers_ = true;
    } else if (body_.size() + size > max_body_) {
      return refuse(413, fmt::format("the request body is larger than the limit of {} bytes", max_body_));
    } else {
      chunk_left_ = size;
      chunk_data_ = true;
    }
  }
  // Consumed bytes go: a chunked body is held once (decoded), whatever its framing costs on the wire.
  if (state_ == State::kNeedMore) {
    buf_.erase(0, pos_);
    pos_ = 0;
  }
  return state_;
}

RequestFramer::State RequestFramer::next() {
  buf_.erase(0, pos_);
  std::string rest = std::move(buf_);
  *this = RequestFramer(max_head_, max_body_);
  return rest.empty() ? state_ : feed(rest);
}

}  // namespace seedling::serve
