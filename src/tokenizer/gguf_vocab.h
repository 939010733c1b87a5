// tokenizer/gguf_vocab.h - a GGUF file's tokenizer (tokenizer.ggml.*) as the tokenizer.json it stands for.
//
// The tokenizer code stays one: the metadata becomes the tokenizer.json a Hugging Face folder of that tokenizer
// holds, and Tokenizer::from_json reads it (Tokenizer::from_file does this for a GGUF file). docs/formats/gguf.md
// has the mapping:
//   - "gpt2" (byte-level BPE): tokens and merges as stored; the pre-tokenizer named by tokenizer.ggml.pre (qwen2,
//     llama3 / llama-bpe, deepseek-v3, gpt-4o, ... as llama.cpp's llama-vocab.cpp names them) as a Sequence of
//     Split(regex, Isolated) pieces, llama.cpp's regexes in their Hugging Face spelling, then ByteLevel;
//   - "llama" (SentencePiece): the pieces with their scores as a BPE whose merges are every split of a piece into
//     two pieces, ranked by the merged piece's score (Hugging Face's LlamaConverter), byte fallback to <0xNN>, "▁"
//     for spaces with a leading one (tokenizer.ggml.add_space_prefix);
//   - token types: control tokens (3) and unknown (2) are special added tokens, user-defined (4) plain added tokens
//     (matched in the raw text, as llama.cpp does);
//   - BOS/EOS added by tokenizer.ggml.add_bos_token / add_eos_token (defaults as llama.cpp: BOS for SentencePiece and
//     the llama3 pre-tokenizer).
// A file with no tokenizer Seedling can run ("none", an unknown pre-tokenizer, missing merges) is an Error that says
// why, naming the file and the key.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "io/gguf.h"
#include "tokenizer/tokenizer.h"

namespace seedling {

// The tokenizer.json text of `g`'s tokenizer; an Error naming the file and key when it has none that runs.
std::string gguf_tokenizer_json(const GgufFile& g);
// The tokenizer of a GGUF file (gguf_tokenizer_json, read by Tokenizer::from_json).
Tokenizer gguf_tokenizer(const GgufFile& g);
// The split regexes of a byte-level BPE pre-tokenizer name (tokenizer.ggml.pre), applied in order; nullptr for a
// name not mapped.
const std::vector<std::string>* gguf_pre_tokenizer_regexes(std::string_view pre);
// "qwen2, llama3, ...": the pre-tokenizer names mapped.
std::string gguf_pre_tokenizers_mapped();

}  // namespace seedling
