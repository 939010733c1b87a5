#include "io/gguf.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <bit>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <numeric>

#include "core/error.h"

namespace seedling {

// Every value is read with memcpy in host order: GGUF as read here is little-endian.
static_assert(std::endian::native == std::endian::little, "the GGUF reader assumes a little-endian host");

namespace {

constexpr char kMagic[4] = {'G', 'G', 'U', 'F'};
constexpr uint32_t kMaxValueType = uint32_t(GgufType::F64);
// The fewest bytes a metadata entry takes (key length, value type, a one-byte value) and a tensor info (name
// length, n_dims, one dimension, type, offset): a count larger than the bytes left allow is refused before any
// memory is reserved for it.
constexpr uint64_t kMinEntryBytes = 8 + 4 + 1;
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 8 + 4 + 8;
// How many entries to reserve for `count` of them: a count the bytes left allow can still be a lie that would
// reserve many times the file's size (entries are larger than their least bytes), so past 2^16 the vector grows as
// entries are read.
size_t reservation(uint64_t count) {
  return size_t(std::min<uint64_t>(count, 1 << 16));
}

// Sizes from gguf-py's GGML_QUANT_SIZES (elements per block, bytes per block).
const std::vector<GgmlTypeInfo> kTypes = {
    {GgmlType::F32, "F32", 1, 4},
    {GgmlType::F16, "F16", 1, 2},
    {GgmlType::Q4_0, "Q4_0", 32, 18},
    {GgmlType::Q4_1, "Q4_1", 32, 20},
    {GgmlType::Q5_0, "Q5_0", 32, 22},
    {GgmlType::Q5_1, "Q5_1", 32, 24},
    {GgmlType::Q8_0, "Q8_0", 32, 34},
    {GgmlType::Q8_1, "Q8_1", 32, 36},
    {GgmlType::Q2_K, "Q2_K", 256, 84},
    {GgmlType::Q3_K, "Q3_K", 256, 110},
    {GgmlType::Q4_K, "Q4_K", 256, 144},
    {GgmlType::Q5_K, "Q5_K", 256, 176},
    {GgmlType::Q6_K, "Q6_K", 256, 210},
    {GgmlType::Q8_K, "Q8_K", 256, 292},
    {GgmlType::IQ2_XXS, "IQ2_XXS", 256, 66},
    {GgmlType::IQ2_XS, "IQ2_XS", 256, 74},
    {GgmlType::IQ3_XXS, "IQ3_XXS", 256, 98},
    {GgmlType::IQ1_S, "IQ1_S", 256, 50},
    {GgmlType::IQ4_NL, "IQ4_NL", 32, 18},
    {GgmlType::IQ3_S, "IQ3_S", 256, 110},
    {GgmlType::IQ2_S, "IQ2_S", 256, 82},
    {GgmlType::IQ4_XS, "IQ4_XS", 256, 136},
    {GgmlType::I8, "I8", 1, 1},
    {GgmlType::I16, "I16", 1, 2},
    {GgmlType::I32, "I32", 1, 4},
    {GgmlType::I64, "I64", 1, 8},
    {GgmlType::F64, "F64", 1, 8},
    {GgmlType::IQ1_M, "IQ1_M", 256, 56},
    {GgmlType::BF16, "BF16", 1, 2},
    {GgmlType::MXFP4, "MXFP4", 32, 17},
};

// Bytes of one scalar of a numeric or bool type; 0 for string and array.
uint64_t scalar_bytes(GgufType t) {
  switch (t) {
    case GgufType::U8:
    case GgufType::I8:
    case GgufType::Bool:
      return 1;
    case GgufType::U16:
    case GgufType::I16:
      return 2;
    case GgufType::U32:
    case GgufType::I32:
    case GgufType::F32:
      return 4;
    case GgufType::U64:
    case GgufType::I64:
    case GgufType::F64:
      return 8;
    case GgufType::String:
    case GgufType::Array:
      return 0;
  }
  return 0;
}

bool is_unsigned(GgufType t) {
  return t == GgufType::U8 || t == GgufType::U16 || t == GgufType::U32 || t == GgufType::U64;
}
bool is_signed(GgufType t) {
  return t == GgufType::I8 || t == GgufType::I16 || t == GgufType::I32 || t == GgufType::I64;
}
bool is_float(GgufType t) {
  return t == GgufType::F32 || t == GgufType::F64;
}

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

// One numeric or bool element at p, widened: unsigned into *u, signed into *i, floats into *f, bool into *b.
void load_scalar(GgufType t, const uint8_t* p, GgufValue* v) {
  switch (t) {
    case GgufType::U8:
      v->u = load<uint8_t>(p);
      break;
    case GgufType::I8:
      v->i = load<int8_t>(p);
      break;
    case GgufType::U16:
      v->u = load<uint16_t>(p);
      break;
    case GgufType::I16:
      v->i = load<int16_t>(p);
      break;
    case GgufType::U32:
      v->u = load<uint32_t>(p);
      break;
    case GgufType::I32:
      v->i = load<int32_t>(p);
      break;
    case GgufType::U64:
      v->u = load<uint64_t>(p);
      break;
    case GgufType::I64:
      v->i = load<int64_t>(p);
      break;
    case GgufType::F32:
      v->f = load<float>(p);
      break;
    case GgufType::F64:
      v->f = load<double>(p);
      break;
    case GgufType::Bool:
      v->b = p[0] != 0;
      break;
    case GgufType::String:
    case GgufType::Array:
      break;
  }
}

// A key or tensor name as an error message shows it: printable ASCII kept, other bytes as \xNN, cut after 96.
std::string printable(std::string_view s) {
  std::string out;
  for (size_t k = 0; k < s.size() && k < 96; ++k) {
    const unsigned char c = static_cast<unsigned char>(s[k]);
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += char(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  if (s.size() > 96) out += fmt::format("... ({} bytes)", s.size());
  return out;
}

// Reads the file front to back; every read is checked against the bytes left and names what it reads. `ctx` says
// where in the file the reader is ("key 'general.name': ", "tensor 'blk.0.attn_q.weight': ").
class Cursor {
 public:
  Cursor(const std::string& path, const uint8_t* data, size_t size) : path_(path), data_(data), size_(size) {}

  size_t pos() const { return pos_; }
  uint64_t left() const { return size_ - pos_; }
  const std::string& path() const { return path_; }
  std::string ctx;

  [[noreturn]] void bad(const std::string& what) const { fail("{}: {}{}", path_, ctx, what); }

  const uint8_t* take(uint64_t n, const char* what) {
    if (n > left()) {
      bad(fmt::format("{} needs {} bytes at byte {}, {} left (file truncated?)", what, n, pos_, left()));
    }
    const uint8_t* p = data_ + pos_;
    pos_ += size_t(n);
    return p;
  }
  template <typename T>
  T get(const char* what) {
    return load<T>(take(sizeof(T), what));
  }
  std::string_view string(const char* what) {
    const uint64_t n = get<uint64_t>(what);
    return {reinterpret_cast<const char*>(take(n, what)), size_t(n)};
  }

 private:
  std::string path_;
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

GgufType value_type(Cursor& c, uint32_t raw, const char* what) {
  if (raw > kMaxValueType) c.bad(fmt::format("{} {} is not a GGUF value type (0 to {})", what, raw, kMaxValueType));
  return GgufType(raw);
}

GgufValue read_value(Cursor& c, GgufType t) {
  GgufValue v;
  v.type = t;
  if (t == GgufType::String) {
    v.str = c.string("the string value");
    return v;
  }
  if (t != GgufType::Array) {
    const uint8_t* p = c.take(scalar_bytes(t), "the value");
    // A bool is one byte, 0 or 1: any other byte is a lie about the type, not a true.
    if (t == GgufType::Bool && p[0] > 1) c.bad(fmt::format("bool value is {}, expected 0 or 1", p[0]));
    load_scalar(t, p, &v);
    return v;
  }
  v.elem_type = value_type(c, c.get<uint32_t>("the array's element type"), "array element type");
  if (v.elem_type == GgufType::Array) c.bad("an array of arrays (nested arrays are not read)");
  v.count = c.get<uint64_t>("the array's length");
  const uint64_t each = v.elem_type == GgufType::String ? 8 : scalar_bytes(v.elem_type);
  if (v.count > c.left() / each) {
    c.bad(fmt::format("array of {} {} needs at least {} bytes each, but {} bytes are left", v.count,
                      gguf_type_name(v.elem_type), each, c.left()));
  }
  if (v.elem_type == GgufType::String) {
    v.strings.reserve(reservation(v.count));
    for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(c.string("a string element"));
    return v;
  }
  v.elems = c.take(v.count * each, "the array's elements");
  if (v.elem_type == GgufType::Bool) {
    for (uint64_t k = 0; k < v.count; ++k) {
      if (v.elems[k] > 1) c.bad(fmt::format("bool element {} is {}, expected 0 or 1", k, v.elems[k]));
    }
  }
  return v;
}

// a * b, or false when it passes 2^63 - 1 (every size and count is kept below that).
bool mul_checked(uint64_t a, uint64_t b, uint64_t* out) {
  return !__builtin_mul_overflow(a, b, out) && *out <= uint64_t(INT64_MAX);
}

}  // namespace

std::string gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8:
      return "u8";
    case GgufType::I8:
      return "i8";
    case GgufType::U16:
      return "u16";
    case GgufType::I16:
      return "i16";
    case GgufType::U32:
      return "u32";
    case GgufType::I32:
      return "i32";
    case GgufType::F32:
      return "f32";
    case GgufType::Bool:
      return "bool";
    case GgufType::String:
      return "string";
    case GgufType::Array:
      return "array";
    case GgufType::U64:
      return "u64";
    case GgufType::I64:
      return "i64";
    case GgufType::F64:
      return "f64";
  }
  return fmt::format("type {}", uint32_t(t));
}

const std::vector<GgmlTypeInfo>& ggml_types() {
  return kTypes;
}

const GgmlTypeInfo* ggml_type_info(uint32_t id) {
  for (const GgmlTypeInfo& t : kTypes) {
    if (uint32_t(t.type) == id) return &t;
  }
  return nullptr;
}

std::string ggml_type_name(GgmlType t) {
  const GgmlTypeInfo* info = ggml_type_info(uint32_t(t));
  return info != nullptr ? info->name : fmt::format("type {}", uint32_t(t));
}

std::string GgufValue::type_string() const {
  return type == GgufType::Array ? "array of " + gguf_type_name(elem_type) : gguf_type_name(type);
}

namespace {

std::string scalar_text(const GgufValue& v) {
  if (is_unsigned(v.type)) return std::to_string(v.u);
  if (is_signed(v.type)) return std::to_string(v.i);
  if (v.type == GgufType::F32) return fmt::format("{}", float(v.f));
  if (v.type == GgufType::F64) return fmt::format("{}", v.f);
  if (v.type == GgufType::Bool) return v.b ? "true" : "false";
  const std::string_view s = v.str.substr(0, 64);
  std::string out(1, '"');  // appended, not "\"" + ...: gcc 12 warns about that concatenation (-Wrestrict)
  out += printable(s);
  out += '"';
  if (v.str.size() > 64) out += fmt::format("... ({} bytes)", v.str.size());
  return out;
}

}  // namespace

std::string gguf_value_text(const GgufValue& v, size_t max_elems) {
  if (v.type != GgufType::Array) return scalar_text(v);
  std::string out = "[";
  const uint64_t shown = std::min<uint64_t>(v.count, max_elems);
  for (uint64_t k = 0; k < shown; ++k) {
    GgufValue e;
    e.type = v.elem_type;
    if (v.elem_type == GgufType::String) {
      e.str = v.strings[size_t(k)];
    } else {
      load_scalar(v.elem_type, v.elems + k * scalar_bytes(v.elem_type), &e);
    }
    out += (k ? ", " : "") + scalar_text(e);
  }
  if (shown < v.count) out += fmt::format(", ... ({} {})", v.count, gguf_type_name(v.elem_type));
  return out + "]";
}

// The parser checked that this product stays below 2^63.
int64_t GgufTensor::numel() const {
  return std::accumulate(dims.begin(), dims.end(), int64_t(1), std::multiplies<>());
}

std::string GgufTensor::dims_string() const {
  return fmt::format("[{}]", fmt::join(dims, ", "));
}

GgufFile::GgufFile(const std::string& path) : map_(path) {
  Cursor c(path, map_.data(), map_.size());
  if (map_.size() < 4) fail("{}: not a GGUF file: {} bytes, too short for the magic \"GGUF\"", path, map_.size());
  const uint8_t* magic = c.take(4, "the magic");
  if (std::memcmp(magic, kMagic, 4) != 0) {
    fail("{}: not a GGUF file: starts with \"{}\", expected \"GGUF\"", path,
         printable({reinterpret_cast<const char*>(magic), 4}));
  }
  version_ = c.get<uint32_t>("the version");
  if (version_ != 2 && version_ != 3) {
    const uint32_t swapped = __builtin_bswap32(version_);
    if (swapped == 2 || swapped == 3)
      fail("{}: a big-endian GGUF file (version {}): only little-endian is read", path, swapped);
    fail("{}: GGUF version {} is not read (versions 2 and 3 are)", path, version_);
  }
  const uint64_t n_tensors = c.get<uint64_t>("the tensor count");
  const uint64_t n_keys = c.get<uint64_t>("the metadata count");
  if (n_keys > c.left() / kMinEntryBytes) {
    fail("{}: the header claims {} metadata entries, but the {} bytes after it hold at most {}", path, n_keys, c.left(),
         c.left() / kMinEntryBytes);
  }

  metadata_.reserve(reservation(n_keys));
  for (uint64_t k = 0; k < n_keys; ++k) {
    c.ctx = fmt::format("metadata entry {}: ", k);
    const std::string_view key = c.string("the key");
    c.ctx = fmt::format("key '{}': ", printable(key));
    const GgufType t = value_type(c, c.get<uint32_t>("the value type"), "value type");
    GgufValue v = read_value(c, t);
    const auto [it, inserted] = key_index_.emplace(std::string(key), metadata_.size());
    if (!inserted) fail("{}: key '{}' appears twice (metadata entries {} and {})", path, printable(key), it->second, k);
    metadata_.emplace_back(std::string(key), std::move(v));
  }
  c.ctx.clear();
  if (const GgufValue* a = find("general.alignment")) {
    if (a->type != GgufType::U32) wrong_type("general.alignment", *a, "u32");
    if (a->u == 0 || (a->u & (a->u - 1)) != 0) {
      fail("{}: key 'general.alignment' is {}, expected a power of two", path, a->u);
    }
    alignment_ = uint32_t(a->u);
  }

  if (n_tensors > c.left() / kMinTensorInfoBytes) {
    fail("{}: the header claims {} tensors, but the {} bytes after the metadata hold at most {} tensor infos", path,
         n_tensors, c.left(), c.left() / kMinTensorInfoBytes);
  }
  tensors_.reserve(reservation(n_tensors));
  for (uint64_t k = 0; k < n_tensors; ++k) {
    c.ctx = fmt::format("tensor info {}: ", k);
    GgufTensor t;
    t.name = std::string(c.string("the name"));
    c.ctx = fmt::format("tensor '{}': ", printable(t.name));
    const uint32_t n_dims = c.get<uint32_t>("n_dims");
    if (n_dims < 1 || n_dims > kGgufMaxDims) c.bad(fmt::format("n_dims is {}, expected 1 to {}", n_dims, kGgufMaxDims));
    for (uint32_t d = 0; d < n_dims; ++d) {
      const uint64_t ne = c.get<uint64_t>("a dimension");
      if (ne == 0 || ne > uint64_t(INT64_MAX)) {
        c.bad(fmt::format("dimension {} is {}, expected 1 to 2^63 - 1", d, ne));
      }
      t.dims.push_back(int64_t(ne));
    }
    const uint32_t type_id = c.get<uint32_t>("the type");
    const GgmlTypeInfo* info = ggml_type_info(type_id);
    if (info == nullptr) c.bad(fmt::format("unknown ggml type {}", type_id));
    t.type = info->type;
    t.offset = c.get<uint64_t>("the offset");
    const auto [it, inserted] = tensor_index_.emplace(t.name, tensors_.size());
    if (!inserted) {
      fail("{}: tensor '{}' appears twice (tensor infos {} and {})", path, printable(t.name), it->second, k);
    }
    tensors_.push_back(std::move(t));
  }
  c.ctx.clear();

  // The data section starts at the first multiple of the alignment after the tensor infos.
  data_offset_ = (uint64_t(c.pos()) + alignment_ - 1) / alignment_ * alignment_;
  const uint64_t size = map_.size();
  for (GgufTensor& t : tensors_) {
    const GgmlTypeInfo& info = *ggml_type_info(uint32_t(t.type));
    auto bad = [&](const std::string& what) { fail("{}: tensor '{}': {}", path, printable(t.name), what); };
    if (uint64_t(t.dims[0]) % info.block_elems != 0) {
      bad(fmt::format("rows of {} elements are not a whole number of {} blocks ({} elements each)", t.dims[0],
                      info.name, info.block_elems));
    }
    // A row's bytes overflow too (2^62 + 5 four-byte elements wrap to 20 bytes; found by tests/fuzz/fuzz_gguf.cpp).
    uint64_t bytes = 0;
    bool fits = mul_checked(uint64_t(t.dims[0]) / info.block_elems, info.block_bytes, &bytes);
    uint64_t elems = uint64_t(t.dims[0]);
    for (size_t d = 1; d < t.dims.size() && fits; ++d) {
      fits = mul_checked(bytes, uint64_t(t.dims[d]), &bytes) && mul_checked(elems, uint64_t(t.dims[d]), &elems);
    }
    if (!fits) bad(fmt::format("{} {} overflows", info.name, t.dims_string()));
    if (t.offset % alignment_ != 0) {
      bad(fmt::format("offset {} is not a multiple of the alignment {}", t.offset, alignment_));
    }
    if (data_offset_ > size || t.offset > size - data_offset_ || bytes > size - data_offset_ - t.offset) {
      bad(
          fmt::format("{} {} needs {} bytes at offset {} of the data section (byte {} of the file), past the end of "
                      "the file ({} bytes; truncated?)",
                      info.name, t.dims_string(), bytes, t.offset, data_offset_ + t.offset, size));
    }
    t.data = map_.data() + data_offset_ + t.offset;
    t.nbytes = size_t(bytes);
  }
  // Two tensors sharing bytes would each be read as the other's: every byte belongs to one tensor at most.
  std::vector<const GgufTensor*> by_offset;
  for (const GgufTensor& t : tensors_) by_offset.push_back(&t);
  std::sort(by_offset.begin(), by_offset.end(),
            [](const GgufTensor* a, const GgufTensor* b) { return a->offset < b->offset; });
  for (size_t k = 1; k < by_offset.size(); ++k) {
    const GgufTensor& a = *by_offset[k - 1];
    const GgufTensor& b = *by_offset[k];
    if (a.offset + a.nbytes > b.offset) {
      fail("{}: tensors '{}' and '{}' overlap (bytes [{}, {}) and [{}, {}) of the data section)", path,
           printable(a.name), printable(b.name), a.offset, a.offset + a.nbytes, b.offset, b.offset + b.nbytes);
    }
  }
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = key_index_.find(key);
  return it == key_index_.end() ? nullptr : &metadata_[it->second].second;
}

const GgufValue& GgufFile::get(const std::string& key, const char* expected) const {
  const GgufValue* v = find(key);
  if (v == nullptr) fail("{}: missing key '{}' (expected {})", path(), key, expected);
  return *v;
}

void GgufFile::wrong_type(const std::string& key, const GgufValue& v, const char* expected) const {
  fail("{}: key '{}' is {}, expected {}", path(), key, v.type_string(), expected);
}

std::string_view GgufFile::get_string(const std::string& key) const {
  const GgufValue& v = get(key, "a string");
  if (v.type != GgufType::String) wrong_type(key, v, "a string");
  return v.str;
}

int64_t GgufFile::get_int(const std::string& key, int64_t min, int64_t max) const {
  const GgufValue& v = get(key, "an integer");
  if (is_signed(v.type)) {
    if (v.i < min || v.i > max) fail("{}: key '{}' is {}, expected {} to {}", path(), key, v.i, min, max);
    return v.i;
  }
  if (!is_unsigned(v.type)) wrong_type(key, v, "an integer");
  if (v.u > uint64_t(INT64_MAX) || int64_t(v.u) < min || int64_t(v.u) > max) {
    fail("{}: key '{}' is {}, expected {} to {}", path(), key, v.u, min, max);
  }
  return int64_t(v.u);
}

double GgufFile::get_float(const std::string& key) const {
  const GgufValue& v = get(key, "a float");
  if (!is_float(v.type)) wrong_type(key, v, "f32 or f64");
  return v.f;
}

bool GgufFile::get_bool(const std::string& key) const {
  const GgufValue& v = get(key, "a bool");
  if (v.type != GgufType::Bool) wrong_type(key, v, "a bool");
  return v.b;
}

const std::vector<std::string_view>& GgufFile::get_string_array(const std::string& key) const {
  const GgufValue& v = get(key, "an array of string");
  if (v.type != GgufType::Array || v.elem_type != GgufType::String) wrong_type(key, v, "an array of string");
  return v.strings;
}

std::vector<int64_t> GgufFile::get_int_array(const std::string& key) const {
  const GgufValue& v = get(key, "an array of integers");
  if (v.type != GgufType::Array || !(is_signed(v.elem_type) || is_unsigned(v.elem_type))) {
    wrong_type(key, v, "an array of integers");
  }
  std::vector<int64_t> out(size_t(v.count));
  const uint64_t each = scalar_bytes(v.elem_type);
  for (uint64_t k = 0; k < v.count; ++k) {
    GgufValue e;
    load_scalar(v.elem_type, v.elems + k * each, &e);
    if (is_unsigned(v.elem_type) && e.u > uint64_t(INT64_MAX)) {
      fail("{}: key '{}': element {} is {}, past the largest int64", path(), key, k, e.u);
    }
    out[size_t(k)] = is_signed(v.elem_type) ? e.i : int64_t(e.u);
  }
  return out;
}

std::vector<double> GgufFile::get_float_array(const std::string& key) const {
  const GgufValue& v = get(key, "an array of f32 or f64");
  if (v.type != GgufType::Array || !is_float(v.elem_type)) wrong_type(key, v, "an array of f32 or f64");
  std::vector<double> out(size_t(v.count));
  const uint64_t each = scalar_bytes(v.elem_type);
  for (uint64_t k = 0; k < v.count; ++k) {
    GgufValue e;
    load_scalar(v.elem_type, v.elems + k * each, &e);
    out[size_t(k)] = e.f;
  }
  return out;
}

const GgufTensor* GgufFile::find_tensor(const std::string& name) const {
  auto it = tensor_index_.find(name);
  return it == tensor_index_.end() ? nullptr : &tensors_[it->second];
}

const GgufTensor& GgufFile::tensor(const std::string& name) const {
  const GgufTensor* t = find_tensor(name);
  if (t == nullptr) fail("{}: missing tensor '{}'", path(), name);
  return *t;
}

bool is_gguf_file(const std::string& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  if (std::filesystem::path(path).extension() == ".gguf") return true;
  char head[4] = {};
  std::ifstream in(path, std::ios::binary);
  return in.read(head, 4) && std::memcmp(head, kMagic, 4) == 0;
}

}  // namespace seedling
