// io/gguf.h - memory-mapped GGUF files (versions 2 and 3, little-endian), read and checked; docs/formats/gguf.md.
//
// A GGUF file is: "GGUF", u32 version, u64 tensor count, u64 metadata count; that many metadata entries (a string
// key, a u32 value type, the value); that many tensor infos (a string name, u32 n_dims, n_dims u64 dimensions with
// ne0 first, u32 ggml type, u64 offset); padding to `general.alignment` (default 32); the data section, each tensor
// at its offset from the section's start. A string is a u64 length and that many bytes (no terminator); an array a
// u32 element type, a u64 count and the elements. Every count, length, dimension, type, offset and size is checked
// against the file before anything is read or handed out, so a truncated or lying file is one Error naming the file
// and the key or tensor, not a read past the end of the mapping.
//
// This is the reader alone: io/gguf_codec.h says which tensors' types are codecs, model/gguf_config.h maps the
// architectures onto families, tokenizer/gguf_vocab.h reads the tokenizer.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "core/mapped_file.h"

namespace seedling {

inline constexpr uint32_t kGgufDefaultAlignment = 32;
inline constexpr uint32_t kGgufMaxDims = 4;  // ggml's GGML_MAX_DIMS

// Metadata value types, numbered as in the file.
enum class GgufType : uint32_t {
  U8 = 0,
  I8 = 1,
  U16 = 2,
  I16 = 3,
  U32 = 4,
  I32 = 5,
  F32 = 6,
  Bool = 7,
  String = 8,
  Array = 9,
  U64 = 10,
  I64 = 11,
  F64 = 12,
};

// "u32", "string", "array"; "type 77" for a number that is no type.
std::string gguf_type_name(GgufType t);

// ggml tensor types, numbered as in the file (ggml.h's ggml_type, gguf-py's GGMLQuantizationType).
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  MXFP4 = 39,
};

// A block of `block_elems` consecutive elements of a row takes `block_bytes` bytes (1 and the element size for the
// plain types).
struct GgmlTypeInfo {
  GgmlType type;
  const char* name;  // "Q4_K", as ggml names it
  uint32_t block_elems;
  uint32_t block_bytes;
};

// The entry of a type id, or nullptr for an id this table does not know.
const GgmlTypeInfo* ggml_type_info(uint32_t id);
// Every known type, by id.
const std::vector<GgmlTypeInfo>& ggml_types();
// "Q4_K"; "type 77" for an id the table does not know.
std::string ggml_type_name(GgmlType t);

// One metadata value. Strings and array elements stay in the mapping: a GgufValue lives as long as its GgufFile.
struct GgufValue {
  GgufType type = GgufType::U8;
  // Scalars: an unsigned integer in `u`, a signed one in `i`, a float in `f`, a bool in `b`, a string in `str`.
  uint64_t u = 0;
  int64_t i = 0;
  double f = 0;
  bool b = false;
  std::string_view str;
  // Arrays: the element type (never Array: nested arrays are refused) and the count; numeric and bool elements at
  // `elems` (little-endian, unaligned), string elements in `strings`.
  GgufType elem_type = GgufType::U8;
  uint64_t count = 0;
  const uint8_t* elems = nullptr;
  std::vector<std::string_view> strings;

  // "u32", "array of string": the type as error messages name it.
  std::string type_string() const;
};

// The value as text, for `seedling info`: 7, 1e-06, true, "qwen3moe", [1, 2, 3] (arrays longer than `max_elems`
// as "[1, 2, 3, ... (151936 u32)]"; strings longer than 64 bytes cut, with their length).
std::string gguf_value_text(const GgufValue& v, size_t max_elems = 8);

struct GgufTensor {
  std::string name;
  GgmlType type = GgmlType::F32;
  std::vector<int64_t> dims;      // ne0 (the contiguous row length) first; each > 0
  uint64_t offset = 0;            // from the start of the data section, a multiple of the alignment
  const uint8_t* data = nullptr;  // inside the mapping
  size_t nbytes = 0;

  int64_t numel() const;
  std::string dims_string() const;  // "[2048, 768]", ne0 first
};

class GgufFile {
 public:
  // Maps `path` and checks all of it (the header, every metadata entry and tensor info, the alignment, every
  // tensor's bytes); throws Error naming the file and what is wrong.
  explicit GgufFile(const std::string& path);

  const std::string& path() const { return map_.path(); }
  uint32_t version() const { return version_; }
  uint64_t file_size() const { return map_.size(); }
  uint32_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the data section starts in the file

  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  // The value of `key`, or nullptr when absent.
  const GgufValue* find(const std::string& key) const;
  bool has(const std::string& key) const { return find(key) != nullptr; }
  // Typed access: each throws Error naming the file, the key and the type found when the key is missing or holds
  // another type. get_int takes any integer type and checks the value against [min, max]; get_float takes f32 or
  // f64; get_int_array any integer element type (each element within int64), get_float_array f32 or f64 elements.
  std::string_view get_string(const std::string& key) const;
  int64_t get_int(const std::string& key, int64_t min = INT64_MIN, int64_t max = INT64_MAX) const;
  double get_float(const std::string& key) const;
  bool get_bool(const std::string& key) const;
  const std::vector<std::string_view>& get_string_array(const std::string& key) const;
  std::vector<int64_t> get_int_array(const std::string& key) const;
  std::vector<double> get_float_array(const std::string& key) const;

  // Tensors in file order.
  const std::vector<GgufTensor>& tensors() const { return tensors_; }
  // The tensor named `name`, or nullptr.
  const GgufTensor* find_tensor(const std::string& name) const;
  // Throws Error naming the tensor and the file when absent.
  const GgufTensor& tensor(const std::string& name) const;

 private:
  const GgufValue& get(const std::string& key, const char* expected) const;
  [[noreturn]] void wrong_type(const std::string& key, const GgufValue& v, const char* expected) const;

  MappedFile map_;
  uint32_t version_ = 0;
  uint32_t alignment_ = kGgufDefaultAlignment;
  uint64_t data_offset_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::map<std::string, size_t, std::less<>> key_index_;
  std::vector<GgufTensor> tensors_;
  std::map<std::string, size_t, std::less<>> tensor_index_;
};

// True when `path` is a regular file named *.gguf or starting with GGUF's magic.
bool is_gguf_file(const std::string& path);

}  // namespace seedling
