// Fuzz target: the HTTP/1.1 request framer (serve/request_framer.h). The first 3 bytes of an input set the head and
// body limits and the seed of the chunk sizes; the rest is fed once whole and once in chunks of 1..64 bytes, taking
// every complete request and starting on the next. Both feeds must frame the same requests and end in the same state
// (the outcome never depends on how TCP cut the bytes), and nothing may crash, leak, hang or trip a sanitizer.
// Built and run by tests/cli/fuzz_request_framer.sh.
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include "serve/request_framer.h"

namespace {

using seedling::serve::RequestFramer;

// What a connection would see: each request framed, then the final state and the refusal status.
struct Outcome {
  std::vector<std::string> requests;
  std::vector<bool> close_after;
  RequestFramer::State state = RequestFramer::State::kNeedMore;
  int refusal_status = 0;
  bool operator==(const Outcome&) const = default;
};

Outcome frame(std::string_view bytes, size_t max_head, size_t max_body, uint32_t chunk_seed) {
  RequestFramer framer(max_head, max_body);
  Outcome out;
  size_t at = 0;
  uint32_t rng = chunk_seed | 1;
  RequestFramer::State s = RequestFramer::State::kNeedMore;
  while (s != RequestFramer::State::kRefused) {
    if (s == RequestFramer::State::kComplete) {
      out.requests.push_back(framer.request());
      out.close_after.push_back(framer.close_after());
      if (out.requests.size() > 64) break;
      s = framer.next();
      continue;
    }
    if (at == bytes.size()) break;
    size_t n = bytes.size() - at;
    if (chunk_seed != 0) {
      rng = rng * 1664525u + 1013904223u;
      n = std::min<size_t>(n, 1 + (rng >> 26));
    }
    s = framer.feed(bytes.substr(at, n));
    at += n;
  }
  out.state = s;
  out.refusal_status = s == RequestFramer::State::kRefused ? framer.refusal_status() : 0;
  if (s == RequestFramer::State::kRefused && framer.refusal().empty()) std::abort();
  return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 3) return 0;
  const size_t max_head = 16 + size_t(data[0]) * 8, max_body = size_t(data[1]) * 16;
  const uint32_t chunk_seed = data[2] + 1u;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 3, size - 3);
  const Outcome whole = frame(bytes, max_head, max_body, 0);
  const Outcome chunked = frame(bytes, max_head, max_body, chunk_seed);
  if (!(whole == chunked)) std::abort();
  return 0;
}
