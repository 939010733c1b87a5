// libFuzzer target for the tokenizer. The first input byte picks what the rest is:
//   0: a tokenizer.json - loading must either work or throw seedling::Error, never crash;
//   1: text for a byte-level tokenizer (Split regex + ByteLevel, no normalizer) - invalid UTF-8 must throw Error,
//      valid text must round-trip through encode/decode, and the streamed text must equal decode;
//   2: ids (int32 little-endian) for a Metaspace + byte-fallback tokenizer - decode and stream must agree.
// Build and run: tests/cli/fuzz_tokenizer.sh (clang -fsanitize=fuzzer).
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "core/error.h"
#include "tokenizer/tokenizer.h"

namespace {

using seedling::Tokenizer;

const char* kByteLevel = R"({"added_tokens": [{"id": 9, "content": "<|x|>", "special": true, "normalized": false}],
  "normalizer": null,
  "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": false},
    {"type": "ByteLevel", "add_prefix_space": false, "trim_offsets": false, "use_regex": false}]},
  "post_processor": null, "decoder": {"type": "ByteLevel"},
  "model": {"type": "BPE", "vocab": VOCAB, "merges": [["Ġ", "t"], ["h", "e"], ["Ġt", "he"]]}})";

std::string byte_level_json() {
  // All 256 byte chars as ids 10.., plus three merged tokens.
  std::string vocab = "{";
  const char* extra[] = {"Ġt", "he", "Ġthe"};
  int id = 10;
  std::vector<std::string> chars;
  for (int b = 0; b < 256; ++b) {
    bool direct = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE);
    static int n = 0;
    uint32_t cp = direct ? b : 256 + n++;
    std::string s;
    if (cp < 0x80) {
      if (cp == '"' || cp == '\\') s += '\\';
      s += static_cast<char>(cp);
    } else {
      s += static_cast<char>(0xC0 | (cp >> 6));
      s += static_cast<char>(0x80 | (cp & 0x3F));
    }
    vocab += (b ? "," : "") + std::string("\"") + s + "\":" + std::to_string(id++);
  }
  for (const char* e : extra) vocab += std::string(",\"") + e + "\":" + std::to_string(id++);
  vocab += "}";
  std::string json = kByteLevel;
  json.replace(json.find("VOCAB"), 5, vocab);
  return json;
}

std::string metaspace_json() {
  std::string vocab = R"("<unk>": 0, "<s>": 1, "</s>": 2)";
  char buf[64];
  for (int b = 0; b < 256; ++b) {
    std::snprintf(buf, sizeof(buf), ", \"<0x%02X>\": %d", b, 3 + b);
    vocab += buf;
  }
  vocab += R"(, "▁": 259, "a": 260, "▁a": 261)";
  return R"({"added_tokens": [{"id": 1, "content": "<s>", "special": true, "normalized": false}],
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
    "decoder": {"type": "Sequence", "decoders": [{"type": "Replace", "pattern": {"String": "▁"}, "content": " "},
      {"type": "ByteFallback"}, {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
    "model": {"type": "BPE", "unk_token": "<unk>", "fuse_unk": true, "byte_fallback": true, "vocab": {)" +
         vocab + R"(}, "merges": [["▁", "a"]]}})";
}

void check(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "fuzz_tokenizer: property broken: %s\n", what);
    std::abort();
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const Tokenizer byte_level = Tokenizer::from_json(byte_level_json(), "fuzz-bytelevel");
  static const Tokenizer metaspace = Tokenizer::from_json(metaspace_json(), "fuzz-metaspace");
  if (size == 0) return 0;
  std::string rest(reinterpret_cast<const char*>(data) + 1, size - 1);
  switch (data[0] % 3) {
    case 0:
      try {
        Tokenizer t = Tokenizer::from_json(rest, "fuzz.json");
        (void)t.encode("Hello world 123 \xE2\x82\xAC", true);
      } catch (const seedling::Error&) {
      }
      break;
    case 1: {
      std::vector<int32_t> ids;
      try {
        ids = byte_level.encode(rest, false);
      } catch (const seedling::Error&) {
        return 0;  // invalid UTF-8
      }
      check(byte_level.decode(ids, false) == rest, "byte-level decode(encode(text)) == text");
      seedling::StreamDecoder sd(byte_level, false);
      std::string streamed;
      for (int32_t id : ids) streamed += sd.push(id);
      streamed += sd.finish();
      check(streamed == rest, "streamed text == text");
      break;
    }
    case 2: {
      std::vector<int32_t> ids(rest.size() / 4);
      if (!ids.empty()) std::memcpy(ids.data(), rest.data(), ids.size() * 4);
      for (int32_t& id : ids) id = static_cast<int32_t>(static_cast<uint32_t>(id) % 300u);
      std::string text = metaspace.decode(ids, false);
      seedling::StreamDecoder sd(metaspace, false);
      std::string streamed;
      for (int32_t id : ids) streamed += sd.push(id);
      streamed += sd.finish();
      check(streamed == text, "metaspace streamed text == decode");
      break;
    }
  }
  return 0;
}
