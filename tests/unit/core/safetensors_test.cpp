// The loader's contract on bad files: one Error naming the file and what is wrong, never a read out of bounds.
#include "io/safetensors.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "core/error.h"
#include "io/safetensors_writer.h"
#include "test_util.h"

namespace seedling {

namespace {

std::string header_file(const std::string& json, size_t data_bytes) {
  std::string s(8, '\0');
  for (int i = 0; i < 8; ++i) s[size_t(i)] = char((uint64_t(json.size()) >> (8 * i)) & 0xff);
  return s + json + std::string(data_bytes, '\x01');
}

// The header padded with spaces so the data starts 8-byte aligned, as the writer does.
std::string aligned_file(std::string json, size_t data_bytes) {
  while ((json.size() + 8) % 8 != 0) json += ' ';
  return header_file(json, data_bytes);
}

}  // namespace

TEST(Safetensors, ATensorNamedTwiceIsAnError) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", aligned_file(R"({"w":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                                                       R"("w":{"dtype":"F32","shape":[1],"data_offsets":[4,8]}})",
                                                       8));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("names tensor 'w' twice"), std::string::npos) << msg;
}

TEST(Safetensors, OverlappingTensorsAreAnError) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", aligned_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
                                                       R"("b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
                                                       12));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("'a' and 'b' overlap"), std::string::npos) << msg;
}

TEST(Safetensors, MisalignedTensorIsAnError) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors",
                   aligned_file(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[2,10]}})", 12));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("'a'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("not a multiple of its 4-byte elements"), std::string::npos) << msg;
}

// Found reading the parser for tests/fuzz/fuzz_safetensors.cpp, whose check that dimensions are >= 0 fails on it:
// after a 0 dimension the size is 0 whatever follows, so 2^64 - 1 was accepted and stored as -1.
TEST(Safetensors, ADimensionPastInt64IsAnErrorEvenAfterAZero) {
  test::ScratchDir dir("st");
  for (const char* dim : {"18446744073709551615", "9223372036854775808"}) {
    test::write_file(
        dir / "t.safetensors",
        aligned_file(fmt::format(R"({{"a":{{"dtype":"F32","shape":[0,{}],"data_offsets":[0,0]}}}})", dim), 0));
    const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
    EXPECT_NE(msg.find("tensor 'a': shape holds a value that is not a non-negative integer"), std::string::npos)
        << dim << ": " << msg;
  }
}

TEST(Safetensors, ReadsWhatTheWriterWrote) {
  test::ScratchDir dir("st");
  SafetensorsWriter w;
  w.add("a", DType::F32, {2, 3}, [](uint8_t* out, size_t off, size_t n) {
    for (size_t i = 0; i < n; ++i) out[i] = uint8_t(off + i);
  });
  w.add("b", DType::BF16, {4}, [](uint8_t* out, size_t, size_t n) { std::fill(out, out + n, 7); });
  w.write(dir / "m.safetensors");
  SafetensorsFile f(dir / "m.safetensors");
  ASSERT_EQ(f.tensors().size(), 2u);
  const TensorInfo& a = f.tensors().at("a");
  EXPECT_EQ(a.shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a.nbytes, 24u);
  EXPECT_EQ(a.data[5], 5);
  EXPECT_EQ(f.tensors().at("b").data[0], 7);
}

TEST(Safetensors, MissingFileNamesThePath) {
  const std::string msg = test::error_of([] { SafetensorsFile f("/nonexistent/x.safetensors"); });
  EXPECT_NE(msg.find("/nonexistent/x.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("cannot open"), std::string::npos) << msg;
}

TEST(Safetensors, TooShortForTheHeaderLength) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", "abc");
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderLengthPastEndOfFile) {
  test::ScratchDir dir("st");
  std::string s = header_file("{}", 0);
  s[0] = char(0xff);
  s[1] = char(0xff);
  test::write_file(dir / "t.safetensors", s);
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("runs past the end"), std::string::npos) << msg;
}

TEST(Safetensors, OffsetsPastEndOfData) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", header_file(R"({"w":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("'w'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("run past the end"), std::string::npos) << msg;
}

TEST(Safetensors, SpanDisagreesWithShape) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", header_file(R"({"w":{"dtype":"BF16","shape":[4],"data_offsets":[0,6]}})", 8));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("needs 8"), std::string::npos) << msg;
}

TEST(Safetensors, HeaderNotJson) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", header_file("{not json", 0));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("not valid JSON"), std::string::npos) << msg;
}

TEST(Safetensors, UnknownDtype) {
  test::ScratchDir dir("st");
  test::write_file(dir / "t.safetensors", header_file(R"({"w":{"dtype":"Q7","shape":[1],"data_offsets":[0,1]}})", 1));
  const std::string msg = test::error_of([&] { SafetensorsFile f(dir / "t.safetensors"); });
  EXPECT_NE(msg.find("unsupported dtype 'Q7'"), std::string::npos) << msg;
}

TEST(Checkpoint, ReadsShardsNamedByTheIndex) {
  Checkpoint ck(test::data_path("models/qwen3_moe_a/hub"));
  EXPECT_TRUE(ck.has("model.embed_tokens.weight"));
  EXPECT_TRUE(ck.has("model.layers.2.mlp.experts.7.down_proj.weight"));
}

TEST(Checkpoint, MissingShardNamesIt) {
  test::ScratchDir dir("ck");
  const std::string src = test::data_path("models/mixtral_a/hub");
  for (const auto& e : std::filesystem::directory_iterator(src)) {
    if (e.path().filename() != "model-00002-of-00003.safetensors") {
      std::filesystem::copy_file(e.path(), dir / e.path().filename().string());
    }
  }
  const std::string msg = test::error_of([&] { Checkpoint ck(dir.str()); });
  EXPECT_NE(msg.find("model-00002-of-00003.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("missing"), std::string::npos) << msg;
}

TEST(Checkpoint, TruncatedShardIsAnError) {
  test::ScratchDir dir("ck");
  const std::string src = test::data_path("models/mixtral_a/hf/model.safetensors");
  std::string bytes = test::read_file(src);
  bytes.resize(bytes.size() / 2);
  test::write_file(dir / "model.safetensors", bytes);
  const std::string msg = test::error_of([&] { Checkpoint ck(dir.str()); });
  EXPECT_NE(msg.find(dir / "model.safetensors"), std::string::npos) << msg;
  EXPECT_NE(msg.find("truncated"), std::string::npos) << msg;
}

}  // namespace seedling
