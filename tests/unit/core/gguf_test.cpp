// The GGUF reader (io/gguf.h): every metadata type and tensor type read as written, by a writer here and by gguf-py
// (tests/data/gguf/, made by its make_files.py); every lie a file can tell is one Error naming the file and the key
// or tensor, never a read past the end of the mapping.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "gguf_builder.h"
#include "io/packed_model.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace seedling {

namespace {

using test::gguf_string;
using test::GgufBuilder;
using test::le;

// The message of opening `bytes` as a GGUF file ("(no error)" when it opens).
std::string open_error(const std::string& bytes) {
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", bytes);
  return test::error_of([&] { GgufFile f(dir / "t.gguf"); });
}

#define EXPECT_HAS(msg, part) EXPECT_NE((msg).find(part), std::string::npos) << (msg)

// A small file of every metadata type and two tensors.
GgufBuilder small_file() {
  GgufBuilder b;
  b.str("general.architecture", "qwen3moe")
      .key("k.u8", GgufType::U8, uint8_t(250))
      .key("k.i8", GgufType::I8, int8_t(-7))
      .key("k.u16", GgufType::U16, uint16_t(65000))
      .key("k.i16", GgufType::I16, int16_t(-300))
      .key("k.u32", GgufType::U32, uint32_t(4000000000u))
      .key("k.i32", GgufType::I32, int32_t(-2))
      .key("k.u64", GgufType::U64, uint64_t(1) << 40)
      .key("k.i64", GgufType::I64, int64_t(-5))
      .key("k.f32", GgufType::F32, 1.5f)
      .key("k.f64", GgufType::F64, 0.1)
      .key("k.bool", GgufType::Bool, uint8_t(1))
      .str("k.string", "hello")
      .array<uint8_t>("k.arr.u8", GgufType::U8, {1, 2})
      .array<int8_t>("k.arr.i8", GgufType::I8, {-1})
      .array<uint16_t>("k.arr.u16", GgufType::U16, {3})
      .array<int16_t>("k.arr.i16", GgufType::I16, {-4, 4})
      .array<uint32_t>("k.arr.u32", GgufType::U32, {5, 6, 7})
      .array<int32_t>("k.arr.i32", GgufType::I32, {-8})
      .array<uint64_t>("k.arr.u64", GgufType::U64, {9})
      .array<int64_t>("k.arr.i64", GgufType::I64, {-10})
      .array<float>("k.arr.f32", GgufType::F32, {0.5f, 2.0f})
      .array<double>("k.arr.f64", GgufType::F64, {-0.25})
      .array<uint8_t>("k.arr.bool", GgufType::Bool, {0, 1})
      .array<uint32_t>("k.arr.empty", GgufType::U32, {})
      .strings("k.arr.string", {"a", "", "bc"});
  b.tensor("w", {32, 2}, GgmlType::Q8_0, 2 * 34, 1).tensor("n", {3}, GgmlType::F32, 12, 100);
  return b;
}

}  // namespace

TEST(Gguf, ReadsEveryMetadataType) {
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", small_file().bytes());
  const GgufFile f(dir / "t.gguf");
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.alignment(), 32u);
  EXPECT_EQ(f.metadata().size(), 26u);
  EXPECT_EQ(f.metadata()[0].first, "general.architecture");
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(f.get_int("k.u8"), 250);
  EXPECT_EQ(f.get_int("k.i8"), -7);
  EXPECT_EQ(f.get_int("k.u16"), 65000);
  EXPECT_EQ(f.get_int("k.i16"), -300);
  EXPECT_EQ(f.get_int("k.u32"), 4000000000);
  EXPECT_EQ(f.get_int("k.i32"), -2);
  EXPECT_EQ(f.get_int("k.u64"), int64_t(1) << 40);
  EXPECT_EQ(f.get_int("k.i64"), -5);
  EXPECT_EQ(f.get_float("k.f32"), 1.5);
  EXPECT_EQ(f.get_float("k.f64"), 0.1);
  EXPECT_TRUE(f.get_bool("k.bool"));
  EXPECT_EQ(f.get_string("k.string"), "hello");
  EXPECT_EQ(f.get_int_array("k.arr.u8"), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(f.get_int_array("k.arr.i8"), (std::vector<int64_t>{-1}));
  EXPECT_EQ(f.get_int_array("k.arr.u16"), (std::vector<int64_t>{3}));
  EXPECT_EQ(f.get_int_array("k.arr.i16"), (std::vector<int64_t>{-4, 4}));
  EXPECT_EQ(f.get_int_array("k.arr.u32"), (std::vector<int64_t>{5, 6, 7}));
  EXPECT_EQ(f.get_int_array("k.arr.i32"), (std::vector<int64_t>{-8}));
  EXPECT_EQ(f.get_int_array("k.arr.u64"), (std::vector<int64_t>{9}));
  EXPECT_EQ(f.get_int_array("k.arr.i64"), (std::vector<int64_t>{-10}));
  EXPECT_EQ(f.get_float_array("k.arr.f32"), (std::vector<double>{0.5, 2.0}));
  EXPECT_EQ(f.get_float_array("k.arr.f64"), (std::vector<double>{-0.25}));
  EXPECT_TRUE(f.get_int_array("k.arr.empty").empty());
  const GgufValue* bools = f.find("k.arr.bool");
  ASSERT_NE(bools, nullptr);
  EXPECT_EQ(bools->type_string(), "array of bool");
  EXPECT_EQ(gguf_value_text(*bools), "[false, true]");
  const auto& strs = f.get_string_array("k.arr.string");
  ASSERT_EQ(strs.size(), 3u);
  EXPECT_EQ(strs[0], "a");
  EXPECT_EQ(strs[1], "");
  EXPECT_EQ(strs[2], "bc");
  EXPECT_EQ(f.find("absent"), nullptr);
}

TEST(Gguf, ReadsTensorsWhereTheyAre) {
  test::ScratchDir dir("gguf");
  const std::string bytes = small_file().bytes();
  test::write_file(dir / "t.gguf", bytes);
  const GgufFile f(dir / "t.gguf");
  ASSERT_EQ(f.tensors().size(), 2u);
  EXPECT_EQ(f.data_offset() % 32, 0u);
  const GgufTensor& w = f.tensor("w");
  EXPECT_EQ(w.type, GgmlType::Q8_0);
  EXPECT_EQ(w.dims, (std::vector<int64_t>{32, 2}));
  EXPECT_EQ(w.dims_string(), "[32, 2]");
  EXPECT_EQ(w.numel(), 64);
  EXPECT_EQ(w.nbytes, 68u);
  EXPECT_EQ(w.offset, 0u);
  EXPECT_EQ(w.data[0], 1);
  EXPECT_EQ(w.data[67], 68);
  const GgufTensor& n = f.tensor("n");
  EXPECT_EQ(n.offset, 96u);  // 68 rounded up to the alignment
  EXPECT_EQ(n.nbytes, 12u);
  EXPECT_EQ(n.data[0], 100);
  EXPECT_EQ(f.find_tensor("absent"), nullptr);
  const std::string msg = test::error_of([&] { f.tensor("absent"); });
  EXPECT_HAS(msg, "missing tensor 'absent'");
  EXPECT_HAS(msg, dir / "t.gguf");
}

TEST(Gguf, ReadsVersion2AndAnAlignmentOf64) {
  GgufBuilder b;
  b.version = 2;
  b.alignment = 64;
  b.key("general.alignment", GgufType::U32, uint32_t(64));
  b.tensor("a", {256}, GgmlType::Q4_K, 144).tensor("b", {32, 3}, GgmlType::MXFP4, 51);
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", b.bytes());
  const GgufFile f(dir / "t.gguf");
  EXPECT_EQ(f.version(), 2u);
  EXPECT_EQ(f.alignment(), 64u);
  EXPECT_EQ(f.data_offset() % 64, 0u);
  EXPECT_EQ(f.tensor("b").offset, 192u);
  EXPECT_EQ(f.tensor("b").nbytes, 51u);
}

TEST(Gguf, AFileWithoutTensorsOrKeysOpens) {
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", "GGUF" + le<uint32_t>(3) + le<uint64_t>(0) + le<uint64_t>(0));
  const GgufFile f(dir / "t.gguf");
  EXPECT_TRUE(f.metadata().empty());
  EXPECT_TRUE(f.tensors().empty());
}

TEST(Gguf, TypedAccessorsNameTheKeyAndTheTypeFound) {
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", small_file().bytes());
  const GgufFile f(dir / "t.gguf");
  const std::string path = dir / "t.gguf";
  std::string msg = test::error_of([&] { f.get_int("no.such.key"); });
  EXPECT_HAS(msg, path + ": missing key 'no.such.key' (expected an integer)");
  msg = test::error_of([&] { f.get_int("k.string"); });
  EXPECT_HAS(msg, path + ": key 'k.string' is string, expected an integer");
  msg = test::error_of([&] { f.get_string("k.u32"); });
  EXPECT_HAS(msg, "key 'k.u32' is u32, expected a string");
  msg = test::error_of([&] { f.get_float("k.i32"); });
  EXPECT_HAS(msg, "key 'k.i32' is i32, expected f32 or f64");
  msg = test::error_of([&] { f.get_bool("k.u8"); });
  EXPECT_HAS(msg, "key 'k.u8' is u8, expected a bool");
  msg = test::error_of([&] { f.get_string_array("k.arr.u32"); });
  EXPECT_HAS(msg, "key 'k.arr.u32' is array of u32, expected an array of string");
  msg = test::error_of([&] { f.get_int_array("k.arr.f32"); });
  EXPECT_HAS(msg, "key 'k.arr.f32' is array of f32, expected an array of integers");
  msg = test::error_of([&] { f.get_float_array("k.arr.i8"); });
  EXPECT_HAS(msg, "key 'k.arr.i8' is array of i8, expected an array of f32 or f64");
  msg = test::error_of([&] { f.get_int_array("k.f32"); });
  EXPECT_HAS(msg, "key 'k.f32' is f32, expected an array of integers");
  // Integers are range-checked, whatever their type.
  msg = test::error_of([&] { f.get_int("k.u32", 0, INT32_MAX); });
  EXPECT_HAS(msg, "key 'k.u32' is 4000000000, expected 0 to 2147483647");
  msg = test::error_of([&] { f.get_int("k.i8", 0, 10); });
  EXPECT_HAS(msg, "key 'k.i8' is -7, expected 0 to 10");
  EXPECT_EQ(f.get_int("k.i8", -7, -7), -7);
}

TEST(Gguf, AU64PastInt64IsOutOfRange) {
  GgufBuilder b;
  b.key("big", GgufType::U64, uint64_t(UINT64_MAX)).array<uint64_t>("bigs", GgufType::U64, {1, UINT64_MAX});
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", b.bytes());
  const GgufFile f(dir / "t.gguf");
  EXPECT_HAS(test::error_of([&] { f.get_int("big"); }), "key 'big' is 18446744073709551615, expected");
  EXPECT_HAS(test::error_of([&] { f.get_int_array("bigs"); }), "key 'bigs': element 1 is 18446744073709551615");
  EXPECT_EQ(gguf_value_text(*f.find("big")), "18446744073709551615");
}

TEST(Gguf, ValueText) {
  GgufBuilder b;
  b.key("f", GgufType::F32, 1e-6f)
      .key("d", GgufType::F64, 0.5)
      .str("s", std::string(70, 'x'))
      .str("nl", "a\nb")
      .array<int32_t>("a", GgufType::I32, {1, 2, 3, 4, 5});
  test::ScratchDir dir("gguf");
  test::write_file(dir / "t.gguf", b.bytes());
  const GgufFile f(dir / "t.gguf");
  EXPECT_EQ(gguf_value_text(*f.find("f")), "1e-06");
  EXPECT_EQ(gguf_value_text(*f.find("d")), "0.5");
  EXPECT_EQ(gguf_value_text(*f.find("s")), "\"" + std::string(64, 'x') + "\"... (70 bytes)");
  EXPECT_EQ(gguf_value_text(*f.find("nl")), "\"a\\x0ab\"");
  EXPECT_EQ(gguf_value_text(*f.find("a")), "[1, 2, 3, 4, 5]");
  EXPECT_EQ(gguf_value_text(*f.find("a"), 2), "[1, 2, ... (5 i32)]");
}

TEST(Gguf, TheTypeTableHoldsGgmlSizes) {
  // Spot checks against gguf-py's GGML_QUANT_SIZES, and every id once.
  struct Want {
    uint32_t id;
    const char* name;
    uint32_t elems, bytes;
  };
  for (const Want& w : std::vector<Want>{{0, "F32", 1, 4},
                                         {2, "Q4_0", 32, 18},
                                         {3, "Q4_1", 32, 20},
                                         {8, "Q8_0", 32, 34},
                                         {10, "Q2_K", 256, 84},
                                         {12, "Q4_K", 256, 144},
                                         {14, "Q6_K", 256, 210},
                                         {19, "IQ1_S", 256, 50},
                                         {23, "IQ4_XS", 256, 136},
                                         {29, "IQ1_M", 256, 56},
                                         {30, "BF16", 1, 2},
                                         {39, "MXFP4", 32, 17}}) {
    const GgmlTypeInfo* t = ggml_type_info(w.id);
    ASSERT_NE(t, nullptr) << w.name;
    EXPECT_STREQ(t->name, w.name);
    EXPECT_EQ(t->block_elems, w.elems) << w.name;
    EXPECT_EQ(t->block_bytes, w.bytes) << w.name;
  }
  std::set<uint32_t> ids;
  for (const GgmlTypeInfo& t : ggml_types()) EXPECT_TRUE(ids.insert(uint32_t(t.type)).second) << t.name;
  EXPECT_EQ(ids.size(), 30u);
  EXPECT_EQ(ggml_type_info(4), nullptr);  // Q4_2, removed from ggml
  EXPECT_EQ(ggml_type_info(40), nullptr);
  EXPECT_EQ(ggml_type_name(GgmlType(77)), "type 77");
}

// Every prefix of a valid file is an Error naming the file; none reads past the end (ASan builds would see it).
TEST(Gguf, TruncatedAtEveryByteIsAnError) {
  const std::string bytes = small_file().bytes();
  test::ScratchDir dir("gguf");
  const std::string path = dir / "t.gguf";
  for (size_t n = 0; n < bytes.size(); ++n) {
    test::write_file(path, bytes.substr(0, n));
    const std::string msg = test::error_of([&] { GgufFile f(path); });
    ASSERT_EQ(msg.rfind(path + ": ", 0), 0u) << "cut at " << n << ": " << msg;
  }
  test::write_file(path, bytes);
  EXPECT_EQ(test::error_of([&] { GgufFile f(path); }), "(no error)");
}

TEST(Gguf, TruncatedInsideAKeyNamesIt) {
  GgufBuilder b;
  b.key("k.u8", GgufType::U8, uint8_t(1)).str("k.string", "hello");
  const std::string bytes = b.bytes();
  const size_t at = bytes.find("k.string") + 8 + 4 + 8 + 2;  // two bytes into the string's value
  EXPECT_HAS(open_error(bytes.substr(0, at)),
             "key 'k.string': the string value needs 5 bytes at byte " + std::to_string(at - 2) + ", 2 left");
}

TEST(Gguf, TruncatedDataNamesTheTensor) {
  const std::string bytes = small_file().bytes();
  const std::string msg = open_error(bytes.substr(0, bytes.size() - 1));
  EXPECT_HAS(msg, "tensor 'n': F32 [3] needs 12 bytes at offset 96 of the data section");
  EXPECT_HAS(msg, "past the end of the file");
}

TEST(Gguf, BadMagicIsAnError) {
  std::string bytes = small_file().bytes();
  bytes[3] = 'X';
  EXPECT_HAS(open_error(bytes), "not a GGUF file: starts with \"GGUX\", expected \"GGUF\"");
  EXPECT_HAS(open_error("GG"), "not a GGUF file: 2 bytes, too short");
}

TEST(Gguf, BadVersionIsAnError) {
  for (uint32_t v : {0u, 1u, 4u, 0xffffffffu}) {
    GgufBuilder b;
    b.version = v;
    EXPECT_HAS(open_error(b.bytes()), fmt::format("GGUF version {} is not read (versions 2 and 3 are)", v));
  }
  GgufBuilder b;
  b.version = 0x03000000;  // 3 written big-endian
  EXPECT_HAS(open_error(b.bytes()), "a big-endian GGUF file (version 3): only little-endian is read");
}

TEST(Gguf, OverlappingTensorsAreAnError) {
  GgufBuilder b;
  b.info("a", {8}, uint32_t(GgmlType::F32), 0).info("b", {8}, uint32_t(GgmlType::F32), 0);
  b.data = std::string(64, '\0');
  EXPECT_HAS(open_error(b.bytes()), "tensors 'a' and 'b' overlap (bytes [0, 32) and [0, 32) of the data section)");
  GgufBuilder c;
  c.info("b", {16}, uint32_t(GgmlType::F32), 32).info("a", {16}, uint32_t(GgmlType::F32), 0);
  c.data = std::string(96, '\0');
  EXPECT_HAS(open_error(c.bytes()), "tensors 'a' and 'b' overlap (bytes [0, 64) and [32, 96)");
}

TEST(Gguf, MisalignedOffsetIsAnError) {
  GgufBuilder b;
  b.info("a", {4}, uint32_t(GgmlType::F32), 4);
  b.data = std::string(64, '\0');
  EXPECT_HAS(open_error(b.bytes()), "tensor 'a': offset 4 is not a multiple of the alignment 32");
}

TEST(Gguf, UnknownTypeNamesTheTensorAndTheId) {
  GgufBuilder b;
  b.info("blk.0.attn_q.weight", {32}, 4, 0);
  b.data = std::string(64, '\0');
  EXPECT_HAS(open_error(b.bytes()), "tensor 'blk.0.attn_q.weight': unknown ggml type 4");
  GgufBuilder c;
  c.info("x", {32}, 0xffffffffu, 0);
  EXPECT_HAS(open_error(c.bytes()), "tensor 'x': unknown ggml type 4294967295");
}

TEST(Gguf, DuplicateKeyIsAnError) {
  GgufBuilder b;
  b.str("general.name", "a").key("x", GgufType::U8, uint8_t(0)).str("general.name", "b");
  EXPECT_HAS(open_error(b.bytes()), "key 'general.name' appears twice (metadata entries 0 and 2)");
}

TEST(Gguf, DuplicateTensorNameIsAnError) {
  GgufBuilder b;
  b.tensor("w", {4}, GgmlType::F32, 16).tensor("w", {4}, GgmlType::F32, 16);
  EXPECT_HAS(open_error(b.bytes()), "tensor 'w' appears twice (tensor infos 0 and 1)");
}

TEST(Gguf, HugeCountsAreRefusedBeforeAnythingIsReserved) {
  const std::string head = "GGUF" + le<uint32_t>(3);
  EXPECT_HAS(open_error(head + le<uint64_t>(0) + le<uint64_t>(uint64_t(1) << 62)),
             "the header claims 4611686018427387904 metadata entries, but the 0 bytes after it hold at most 0");
  EXPECT_HAS(open_error(head + le<uint64_t>(UINT64_MAX) + le<uint64_t>(0) + std::string(100, '\0')),
             "the header claims 18446744073709551615 tensors, but the 100 bytes after the metadata hold at most 3");
  GgufBuilder b;
  b.raw_key("tokens", uint32_t(GgufType::Array),
            le<uint32_t>(uint32_t(GgufType::String)) + le<uint64_t>(UINT64_MAX) + std::string(80, '\0'));
  EXPECT_HAS(open_error(b.bytes()),
             "key 'tokens': array of 18446744073709551615 string needs at least 8 bytes each, but 106 bytes are left");
  GgufBuilder c;
  c.raw_key("scores", uint32_t(GgufType::Array),
            le<uint32_t>(uint32_t(GgufType::F64)) + le<uint64_t>(uint64_t(1) << 61) + std::string(80, '\0'));
  EXPECT_HAS(open_error(c.bytes()), "key 'scores': array of 2305843009213693952 f64 needs at least 8 bytes each");
  GgufBuilder d;
  d.raw_key("name", uint32_t(GgufType::String), le<uint64_t>(UINT64_MAX) + "abc");
  EXPECT_HAS(open_error(d.bytes()), "key 'name': the string value needs 18446744073709551615 bytes at byte");
  GgufBuilder e;
  e.keys = le<uint64_t>(uint64_t(1) << 60) + std::string(20, 'k');
  e.n_keys = 1;
  EXPECT_HAS(open_error(e.bytes()), "metadata entry 0: the key needs 1152921504606846976 bytes at byte 32");
}

TEST(Gguf, NestedArraysAndUnknownValueTypesAreRefused) {
  GgufBuilder b;
  b.raw_key("nested", uint32_t(GgufType::Array), le<uint32_t>(uint32_t(GgufType::Array)) + le<uint64_t>(1));
  EXPECT_HAS(open_error(b.bytes()), "key 'nested': an array of arrays (nested arrays are not read)");
  GgufBuilder c;
  c.raw_key("odd", 13, le<uint32_t>(0));
  EXPECT_HAS(open_error(c.bytes()), "key 'odd': value type 13 is not a GGUF value type (0 to 12)");
  GgufBuilder d;
  d.raw_key("odd", uint32_t(GgufType::Array), le<uint32_t>(99) + le<uint64_t>(0));
  EXPECT_HAS(open_error(d.bytes()), "key 'odd': array element type 99 is not a GGUF value type");
}

TEST(Gguf, ABoolIsZeroOrOne) {
  GgufBuilder b;
  b.key("b", GgufType::Bool, uint8_t(2));
  EXPECT_HAS(open_error(b.bytes()), "key 'b': bool value is 2, expected 0 or 1");
  GgufBuilder c;
  c.array<uint8_t>("bs", GgufType::Bool, {1, 0, 7});
  EXPECT_HAS(open_error(c.bytes()), "key 'bs': bool element 2 is 7, expected 0 or 1");
}

TEST(Gguf, AlignmentMustBeAU32PowerOfTwo) {
  for (uint32_t a : {0u, 3u, 48u}) {
    GgufBuilder b;
    b.key("general.alignment", GgufType::U32, a);
    EXPECT_HAS(open_error(b.bytes()), fmt::format("key 'general.alignment' is {}, expected a power of two", a));
  }
  GgufBuilder b;
  b.key("general.alignment", GgufType::I32, int32_t(32));
  EXPECT_HAS(open_error(b.bytes()), "key 'general.alignment' is i32, expected u32");
  // A lying alignment: the data would start past the end of the file.
  GgufBuilder c;
  c.key("general.alignment", GgufType::U32, uint32_t(1) << 31);
  c.info("a", {4}, uint32_t(GgmlType::F32), 0);
  c.data = std::string(16, '\0');
  EXPECT_HAS(open_error(c.bytes()),
             "tensor 'a': F32 [4] needs 16 bytes at offset 0 of the data "
             "section (byte 2147483648 of the file), past the end");
}

TEST(Gguf, DimensionsAreChecked) {
  const auto dims_error = [](const std::vector<uint64_t>& dims, GgmlType type) {
    GgufBuilder b;
    b.info("t", dims, uint32_t(type), 0);
    b.data = std::string(1024, '\0');
    return open_error(b.bytes());
  };
  EXPECT_HAS(dims_error({}, GgmlType::F32), "tensor 't': n_dims is 0, expected 1 to 4");
  EXPECT_HAS(dims_error({1, 1, 1, 1, 1}, GgmlType::F32), "tensor 't': n_dims is 5, expected 1 to 4");
  EXPECT_HAS(dims_error({4, 0}, GgmlType::F32), "tensor 't': dimension 1 is 0, expected 1 to 2^63 - 1");
  EXPECT_HAS(dims_error({uint64_t(1) << 63}, GgmlType::F32), "dimension 0 is 9223372036854775808, expected 1");
  EXPECT_HAS(dims_error({uint64_t(1) << 32, uint64_t(1) << 32}, GgmlType::F32),
             "tensor 't': F32 [4294967296, "
             "4294967296] overflows");
  EXPECT_HAS(dims_error({256, uint64_t(1) << 62}, GgmlType::I8), "tensor 't': I8 [256, 4611686018427387904] overflows");
  // Found by tests/fuzz/fuzz_gguf.cpp: one row's bytes wrapped, (2^62 + 5) x 4 read as 20 bytes.
  EXPECT_HAS(dims_error({(uint64_t(1) << 62) + 5, 1, 1, 1}, GgmlType::I32),
             "tensor 't': I32 [4611686018427387909, 1, 1, 1] overflows");
  EXPECT_HAS(dims_error({uint64_t(1) << 61}, GgmlType::F64), "tensor 't': F64 [2305843009213693952] overflows");
  EXPECT_HAS(dims_error({100, 2}, GgmlType::Q4_K),
             "tensor 't': rows of 100 elements are not a whole number of Q4_K blocks (256 elements each)");
  EXPECT_HAS(dims_error({64, 1024}, GgmlType::F32), "tensor 't': F32 [64, 1024] needs 262144 bytes");
  EXPECT_EQ(dims_error({64, 4}, GgmlType::F32), "(no error)");
}

TEST(Gguf, NamesWithOddBytesArePrintedEscaped) {
  GgufBuilder b;
  b.info(std::string("a\nb\0c", 5), {4}, 4, 0);
  EXPECT_HAS(open_error(b.bytes()), "tensor 'a\\x0ab\\x00c': unknown ggml type 4");
}

TEST(Gguf, MissingFileNamesThePath) {
  const std::string msg = test::error_of([] { GgufFile f("/nonexistent/x.gguf"); });
  EXPECT_HAS(msg, "/nonexistent/x.gguf: cannot open");
}

TEST(Gguf, IsGgufFileByNameOrMagic) {
  test::ScratchDir dir("gguf");
  test::write_file(dir / "model.bin", small_file().bytes());
  test::write_file(dir / "named.gguf", "not gguf");
  test::write_file(dir / "other.bin", "not gguf");
  EXPECT_TRUE(is_gguf_file(dir / "model.bin"));
  EXPECT_TRUE(is_gguf_file(dir / "named.gguf"));
  EXPECT_FALSE(is_gguf_file(dir / "other.bin"));
  EXPECT_FALSE(is_gguf_file(dir.str()));
  EXPECT_FALSE(is_gguf_file(dir / "absent.gguf"));
}

// gguf-py's GGUFWriter: every metadata type, tokenizer-shaped keys, tensors of several types, bytes 0, 1, 2, ...
TEST(GgufFiles, EveryTypeFromGgufPy) {
  const GgufFile f(test::data_path("gguf/every_type.gguf"));
  EXPECT_EQ(f.version(), 3u);
  EXPECT_EQ(f.get_string("general.architecture"), "testarch");
  EXPECT_EQ(f.get_string("general.name"), "every type");
  EXPECT_EQ(f.get_int("test.u8"), 200);
  EXPECT_EQ(f.get_int("test.i8"), -100);
  EXPECT_EQ(f.get_int("test.u16"), 60000);
  EXPECT_EQ(f.get_int("test.i16"), -30000);
  EXPECT_EQ(f.get_int("test.u32"), 4000000000);
  EXPECT_EQ(f.get_int("test.i32"), -2000000000);
  EXPECT_EQ(f.find("test.u64")->u, (uint64_t(1) << 63) + 5);
  EXPECT_EQ(f.get_int("test.i64"), -(int64_t(1) << 62));
  EXPECT_EQ(f.get_float("test.f32"), 0.25);
  EXPECT_EQ(f.get_float("test.f64"), -1e300);
  EXPECT_TRUE(f.get_bool("test.bool"));
  EXPECT_EQ(f.get_string("test.string"), "h\xc3\xa9llo");
  EXPECT_EQ(f.get_int_array("test.arr.u8"), (std::vector<int64_t>{1, 2, 255}));
  EXPECT_EQ(f.get_int_array("test.arr.i8"), (std::vector<int64_t>{-1, 0, 1}));
  EXPECT_EQ(f.get_int_array("test.arr.u16"), (std::vector<int64_t>{65535}));
  EXPECT_EQ(f.get_int_array("test.arr.i16"), (std::vector<int64_t>{-32768, 7}));
  EXPECT_EQ(f.get_int_array("test.arr.u32"), (std::vector<int64_t>{1, 2, 3, 4}));
  EXPECT_EQ(f.get_int_array("test.arr.i32"), (std::vector<int64_t>{-5, 5}));
  EXPECT_EQ(f.get_int_array("test.arr.i64"), (std::vector<int64_t>{INT64_MIN, INT64_MAX}));
  EXPECT_EQ(f.get_float_array("test.arr.f32"), (std::vector<double>{0.5, -2.0}));
  EXPECT_EQ(f.get_float_array("test.arr.f64"), (std::vector<double>{1e-300, 3.0}));
  EXPECT_EQ(gguf_value_text(*f.find("test.arr.bool")), "[true, false, true]");
  EXPECT_EQ(gguf_value_text(*f.find("test.arr.u64")), "[18446744073709551615]");
  const auto& s = f.get_string_array("test.arr.string");
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[2], "long string \xe4\xb8\xad");
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "gpt2");
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.tokens").size(), 5u);
  EXPECT_EQ(f.get_int_array("tokenizer.ggml.token_type"), (std::vector<int64_t>{3, 3, 1, 1, 1}));
  EXPECT_EQ(f.get_float_array("tokenizer.ggml.scores")[4], -3.0);
  EXPECT_EQ(f.get_string_array("tokenizer.ggml.merges")[0], "a b");
  EXPECT_EQ(f.get_int("testarch.expert_count"), 4);

  struct Want {
    const char* name;
    GgmlType type;
    std::vector<int64_t> dims;
    size_t nbytes;
  };
  const std::vector<Want> want = {{"t.f32", GgmlType::F32, {2, 3}, 24},      {"t.f16", GgmlType::F16, {4}, 8},
                                  {"t.bf16", GgmlType::BF16, {2, 2, 2}, 16}, {"t.q8_0", GgmlType::Q8_0, {64, 2}, 136},
                                  {"t.q4_k", GgmlType::Q4_K, {256, 1}, 144}, {"t.mxfp4", GgmlType::MXFP4, {32, 3}, 51},
                                  {"t.i32", GgmlType::I32, {5, 1, 1, 1}, 20}};
  ASSERT_EQ(f.tensors().size(), want.size());
  for (size_t k = 0; k < want.size(); ++k) {
    const GgufTensor& t = f.tensors()[k];
    EXPECT_EQ(t.name, want[k].name);
    EXPECT_EQ(t.type, want[k].type) << t.name;
    EXPECT_EQ(t.dims, want[k].dims) << t.name;
    ASSERT_EQ(t.nbytes, want[k].nbytes) << t.name;
    for (size_t i = 0; i < t.nbytes; ++i) ASSERT_EQ(t.data[i], i % 251) << t.name << " byte " << i;
  }
}

// tools/packed_to_gguf.py of a packed folder (both committed): every Q4_1 tensor holds the packed q4_g32 bytes,
// stacked experts included, and every F32 norm the packed bf16 widened.
TEST(GgufFiles, PackedToGgufKeepsThePackedBytes) {
  const GgufFile f(test::data_path("gguf/qwen3moe_q4_1.gguf"));
  const auto packed = PackedModel::open(test::data_path("gguf/qwen3moe_q4_1"));
  EXPECT_EQ(f.get_string("general.architecture"), "qwen3moe");
  EXPECT_EQ(f.get_int("qwen3moe.block_count"), 2);
  EXPECT_EQ(f.get_int("qwen3moe.embedding_length"), 64);
  EXPECT_EQ(f.get_int("qwen3moe.expert_count"), 4);
  EXPECT_EQ(f.get_int("qwen3moe.expert_used_count"), 2);
  EXPECT_EQ(f.get_int("qwen3moe.expert_feed_forward_length"), 32);
  EXPECT_EQ(f.get_int("qwen3moe.attention.head_count"), 2);
  EXPECT_EQ(f.get_float("qwen3moe.attention.layer_norm_rms_epsilon"), double(1e-6f));
  EXPECT_EQ(f.get_string("tokenizer.ggml.model"), "none");
  EXPECT_EQ(f.tensors().size(), 3u + 2u * 12u);

  const auto same_bytes = [&](const std::string& gguf_name, const uint8_t* data, size_t bytes) {
    const GgufTensor& t = f.tensor(gguf_name);
    ASSERT_EQ(t.nbytes, bytes) << gguf_name;
    EXPECT_EQ(std::memcmp(t.data, data, bytes), 0) << gguf_name;
  };
  const auto resident = [&](const std::string& gguf_name, const std::string& packed_name, GgmlType type,
                            std::vector<int64_t> dims) {
    const PackedTensor& p = packed->tensor(packed_name);
    const GgufTensor& t = f.tensor(gguf_name);
    EXPECT_EQ(t.type, type) << gguf_name;
    EXPECT_EQ(t.dims, dims) << gguf_name;
    same_bytes(gguf_name, p.data, p.bytes);
  };
  resident("token_embd.weight", "model.embed_tokens.weight", GgmlType::Q4_1, {64, 64});
  resident("output.weight", "lm_head.weight", GgmlType::Q4_1, {64, 64});
  for (int l = 0; l < 2; ++l) {
    const std::string b = fmt::format("blk.{}.", l), p = fmt::format("model.layers.{}.", l);
    resident(b + "attn_q.weight", p + "self_attn.q_proj.weight", GgmlType::Q4_1, {64, 64});
    resident(b + "attn_k.weight", p + "self_attn.k_proj.weight", GgmlType::Q4_1, {64, 32});
    resident(b + "attn_v.weight", p + "self_attn.v_proj.weight", GgmlType::Q4_1, {64, 32});
    resident(b + "attn_output.weight", p + "self_attn.o_proj.weight", GgmlType::Q4_1, {64, 64});
    resident(b + "ffn_gate_inp.weight", p + "mlp.gate.weight", GgmlType::BF16, {64, 4});
    // Norms: bf16 widened to f32 exactly.
    const PackedTensor& norm = packed->tensor(p + "input_layernorm.weight");
    const GgufTensor& t = f.tensor(b + "attn_norm.weight");
    ASSERT_EQ(t.type, GgmlType::F32);
    ASSERT_EQ(t.nbytes, norm.bytes * 2);
    for (size_t i = 0; i < norm.bytes / 2; ++i) {
      uint16_t h;
      uint32_t w;
      std::memcpy(&h, norm.data + 2 * i, 2);
      std::memcpy(&w, t.data + 4 * i, 4);
      ASSERT_EQ(w, uint32_t(h) << 16) << b << "attn_norm.weight element " << i;
    }
    // Experts: the GGUF stacks each expert's part; the packed folder keeps one blob per expert.
    const PackedExpertLayer& layer = packed->expert_layer(l);
    const std::string blobs = test::read_file(layer.file);
    const char* parts[3] = {"ffn_gate_exps.weight", "ffn_up_exps.weight", "ffn_down_exps.weight"};
    for (int part = 0; part < 3; ++part) {
      const PackedExpertPart& pp = layer.parts[part];
      const GgufTensor& e = f.tensor(b + parts[part]);
      EXPECT_EQ(e.type, GgmlType::Q4_1);
      EXPECT_EQ(e.dims, (std::vector<int64_t>{pp.cols, pp.rows, 4}));
      ASSERT_EQ(e.nbytes, 4 * pp.bytes);
      for (int x = 0; x < 4; ++x) {
        const uint64_t at = packed->expert_blob(l, x).offset + pp.offset;
        EXPECT_EQ(std::memcmp(e.data + x * pp.bytes, blobs.data() + at, pp.bytes), 0) << b << parts[part] << " " << x;
      }
    }
  }
}

// tools/gpt_oss_bench_model.py gguf of the tiny MXFP4 gpt_oss checkpoint: BF16 matrices as stored, and each MXFP4
// block the released exponent and codes in ggml's order (exponent byte, then byte j = elements j and j + 16).
TEST(GgufFiles, GptOssMxfp4HoldsTheCheckpointsWeights) {
  const GgufFile f(test::data_path("gguf/gpt_oss_mxfp4.gguf"));
  const Checkpoint ck(test::data_path("models/gpt_oss_mxfp4/hub"));
  EXPECT_EQ(f.get_string("general.architecture"), "gpt-oss");
  EXPECT_EQ(f.get_int("gpt-oss.block_count"), 2);
  EXPECT_EQ(f.get_int("gpt-oss.expert_count"), 8);
  EXPECT_EQ(f.get_int("gpt-oss.attention.sliding_window"), 6);
  EXPECT_EQ(f.get_string("gpt-oss.rope.scaling.type"), "yarn");
  EXPECT_EQ(f.get_float("gpt-oss.rope.scaling.factor"), 8.0);
  EXPECT_EQ(f.tensors().size(), 41u);
  std::map<GgmlType, int> types;
  for (const GgufTensor& t : f.tensors()) ++types[t.type];
  EXPECT_EQ(types[GgmlType::MXFP4], 6);
  EXPECT_EQ(types[GgmlType::BF16], 2 + 2 * 5);
  EXPECT_EQ(types[GgmlType::F32], 41 - 6 - 12);

  const TensorInfo& embed = ck.get("model.embed_tokens.weight");
  const GgufTensor& te = f.tensor("token_embd.weight");
  EXPECT_EQ(te.type, GgmlType::BF16);
  EXPECT_EQ(te.dims, (std::vector<int64_t>{64, 256}));
  ASSERT_EQ(te.nbytes, embed.nbytes);
  EXPECT_EQ(std::memcmp(te.data, embed.data, te.nbytes), 0);

  for (int l = 0; l < 2; ++l) {
    const std::string p = fmt::format("model.layers.{}.mlp.experts.", l);
    const TensorInfo& blocks = ck.get(p + "down_proj_blocks");  // (experts, hidden, width / 32, 16)
    const TensorInfo& scales = ck.get(p + "down_proj_scales");  // (experts, hidden, width / 32)
    const GgufTensor& down = f.tensor(fmt::format("blk.{}.ffn_down_exps.weight", l));
    EXPECT_EQ(down.type, GgmlType::MXFP4);
    EXPECT_EQ(down.dims, (std::vector<int64_t>{96, 64, 8}));
    ASSERT_EQ(down.nbytes, scales.nbytes * 17);
    for (size_t k = 0; k < scales.nbytes; ++k) {
      const uint8_t* g = down.data + 17 * k;
      ASSERT_EQ(g[0], scales.data[k]) << "block " << k;
      for (int j = 0; j < 32; ++j) {
        const uint8_t released = blocks.data[16 * k + size_t(j / 2)];
        const int code = j % 2 == 0 ? released & 15 : released >> 4;
        const int stored = j < 16 ? g[1 + j] & 15 : g[1 + j - 16] >> 4;
        ASSERT_EQ(stored, code) << "block " << k << " element " << j;
      }
    }
  }
}

}  // namespace seedling
