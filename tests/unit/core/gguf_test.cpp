// The GGUF reader (io/gguf.h): every metadata type and tensor type read as written by a writer here; every lie a
// file can tell is one Error naming the file and the key or tensor, never a read past the end of the mapping.
#include "io/gguf.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "test_util.h"

namespace seedling {

namespace {

template <typename T>
std::string le(T v) {
  std::string s(sizeof(T), '\0');
  std::memcpy(s.data(), &v, sizeof(T));
  return s;
}

std::string gguf_string(const std::string& s) {
  return le<uint64_t>(s.size()) + s;
}

// A GGUF file built field by field, so that a test can write any lie: metadata entries and tensor infos are raw
// bytes appended in order; bytes() puts the header before them and pads the data section to `alignment`.
struct GgufBuilder {
  uint32_t version = 3;
  uint32_t alignment = kGgufDefaultAlignment;  // where bytes() starts the data (general.alignment is a key of its own)
  uint64_t n_keys = 0, n_tensors = 0;
  std::string keys, infos, data;

  GgufBuilder& raw_key(const std::string& key, uint32_t type, const std::string& value) {
    keys += gguf_string(key) + le<uint32_t>(type) + value;
    ++n_keys;
    return *this;
  }
  template <typename T>
  GgufBuilder& key(const std::string& k, GgufType t, T v) {
    return raw_key(k, uint32_t(t), le<T>(v));
  }
  GgufBuilder& str(const std::string& k, const std::string& v) {
    return raw_key(k, uint32_t(GgufType::String), gguf_string(v));
  }
  template <typename T>
  GgufBuilder& array(const std::string& k, GgufType elem, const std::vector<T>& v) {
    std::string bytes = le<uint32_t>(uint32_t(elem)) + le<uint64_t>(v.size());
    for (const T& x : v) bytes += le<T>(x);
    return raw_key(k, uint32_t(GgufType::Array), bytes);
  }
  GgufBuilder& strings(const std::string& k, const std::vector<std::string>& v) {
    std::string bytes = le<uint32_t>(uint32_t(GgufType::String)) + le<uint64_t>(v.size());
    for (const std::string& x : v) bytes += gguf_string(x);
    return raw_key(k, uint32_t(GgufType::Array), bytes);
  }
  // A tensor info with the offset given; no data is added.
  GgufBuilder& info(const std::string& name, const std::vector<uint64_t>& dims, uint32_t type, uint64_t offset) {
    infos += gguf_string(name) + le<uint32_t>(uint32_t(dims.size()));
    for (uint64_t d : dims) infos += le<uint64_t>(d);
    infos += le<uint32_t>(type) + le<uint64_t>(offset);
    ++n_tensors;
    return *this;
  }
  // A tensor whose `nbytes` bytes (k + seed, mod 256) go at the next aligned offset of the data section.
  GgufBuilder& tensor(const std::string& name, const std::vector<uint64_t>& dims, GgmlType type, size_t nbytes,
                      uint8_t seed = 0) {
    while (data.size() % alignment != 0) data += '\0';
    info(name, dims, uint32_t(type), data.size());
    for (size_t k = 0; k < nbytes; ++k) data += char(uint8_t(k + seed));
    return *this;
  }
  std::string bytes() const {
    std::string s = "GGUF" + le<uint32_t>(version) + le<uint64_t>(n_tensors) + le<uint64_t>(n_keys) + keys + infos;
    while (s.size() % alignment != 0) s += '\0';
    return s + data;
  }
};

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

TEST(Gguf, OnlyInfoReadsAGgufFile) {
  test::ScratchDir dir("gguf");
  test::write_file(dir / "model.bin", small_file().bytes());
  test::write_file(dir / "named.gguf", "not gguf");
  test::write_file(dir / "other.bin", "not gguf");
  EXPECT_TRUE(is_gguf_file(dir / "model.bin"));
  EXPECT_TRUE(is_gguf_file(dir / "named.gguf"));
  EXPECT_FALSE(is_gguf_file(dir / "other.bin"));
  EXPECT_FALSE(is_gguf_file(dir.str()));
  EXPECT_FALSE(is_gguf_file(dir / "absent.gguf"));
  EXPECT_HAS(test::error_of([&] { refuse_gguf_model(dir / "model.bin"); }),
             dir / "model.bin" + ": a GGUF file: Seedling reads GGUF files with `seedling info` only so far");
  EXPECT_EQ(test::error_of([&] { refuse_gguf_model(dir / "other.bin"); }), "(no error)");
  EXPECT_EQ(test::error_of([&] { refuse_gguf_model(dir.str()); }), "(no error)");
}

}  // namespace seedling
