#!/usr/bin/env python3
"""Reference data for Seedling's tokenizer, made with Hugging Face `tokenizers` on the GPU machine.

What it does (no network needed):
  1. Trains two small BPE tokenizers on a corpus built on this machine (the Python stdlib sources plus the
     multilingual test strings below):
       bytelevel_bpe  - byte-level BPE, NFC normalizer, Split with the Qwen2/Qwen3 regex (Qwen, DeepSeek style)
       metaspace_bpe  - Metaspace BPE with byte_fallback and <0xNN> byte tokens (Mistral, Llama style)
     and derives variants from them that exercise one more component each (merges as "a b" strings,
     ignore_merges, GPT-2 ByteLevel regex, Split behaviours, Digits, NFKC/Lowercase/Replace, added-token flags,
     Metaspace prepend schemes, unk without byte fallback, post-processors).
  2. For every tokenizer (trained, variants, and each real tokenizer.json found under --real-dir) records ids
     with and without special tokens, the tokens, decoded text, decodes of random id sequences and of every
     prefix of a few multi-byte cases.
  3. Times HF's single-threaded encode of a ~10 MB text that it generates deterministically (the generator is
     written down in bench.json so the C++ side rebuilds it byte for byte; an FNV-1a hash checks it).

Usage:
  python3 tools/make_tokenizer_goldens.py OUT_DIR [--real-dir tests/data/tokenizer/real] [--bench-mb 10]
Then copy OUT_DIR/* into tests/data/tokenizer/ (it creates trained/*.json.xz, golden/*.json.xz, bench.json,
MANIFEST.json). Goldens are xz-compressed JSON; the C++ tests read them with `xz -dc`.
"""
from __future__ import annotations

import argparse
import glob
import json
import lzma
import os
import platform
import random
import sys
import sysconfig
import time
import traceback
from pathlib import Path

# Single thread for every measurement and for determinism; must be set before tokenizers is imported.
os.environ["RAYON_NUM_THREADS"] = "1"
os.environ["RAYON_RS_NUM_CPUS"] = "1"
os.environ["TOKENIZERS_PARALLELISM"] = "false"

import tokenizers  # noqa: E402
from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers  # noqa: E402
from tokenizers import processors, trainers  # noqa: E402

QWEN2_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
LLAMA3_REGEX = (
    r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+"
)
DEEPSEEK_REGEXES = [
    r"\p{N}{1,3}",
    r"[一-龥぀-ゟ゠-ヿ]+",
    r"[!\"#$%&'()*+,\-./:;<=>?@\[\\\]^_`{|}~][A-Za-z]+|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*"
    r"|\s*[\r\n]+|\s+(?!\S)|\s+",
]

# ----------------------------------------------------------------------------------------------------------------
# Test strings. Each is (name, text). Special tokens inside text are added per tokenizer (see special_cases).
# ----------------------------------------------------------------------------------------------------------------

CODE_PY = '''def fib(n: int) -> int:
    """Return the n-th Fibonacci number."""
    a, b = 0, 1
    for _ in range(n):
        a, b = b, a + b
    return a


if __name__ == "__main__":
    print(f"{fib(30)=}")  # 832040
'''

CODE_CPP = """#include <vector>
template <typename T>
static T sum(const std::vector<T>& xs) {
\tT acc{};
\tfor (auto x : xs) acc += x;  // no FMA
\treturn acc;
}
int main(){return sum<int>({1,2,3})==6?0:1;}
"""

CODE_JSON = '{"name": "Seedling", "ids": [1, 2, 3], "nested": {"a": null, "b": true, "c": -1.5e-3}, "s": "\\u00e9\\n"}'

RANDOM = random.Random(20240601)


def _random_word(n: int, alphabet: str) -> str:
    return "".join(RANDOM.choice(alphabet) for _ in range(n))


BASE_CASES: list[tuple[str, str]] = [
    ("empty", ""),
    ("single_space", " "),
    ("single_letter", "a"),
    ("hello", "Hello, world!"),
    ("hello_leading_space", " Hello world"),
    ("sentence", "The quick brown fox jumps over the lazy dog."),
    ("contractions", "I'm sure you'll see they've said it's John's and we'd've OK'd it. DON'T SHOUT'S"),
    ("long_s_caseless", "'ſ 'S 'Ll 'LL 'RE"),
    ("numbers", "1 12 123 1234 12345 123456 3.14159 1,000,000 0x1F 1e-9 -42"),
    ("unicode_digits", "٣٤٥ ০১২ ①②③ ½ Ⅻ 𝟘𝟙𝟚 ¹²³"),
    ("punctuation", "Hello!!! What?! ... --- ((())) [[]] {{}} <<>> ''\"\" `` ~~ ** && || ;; ::"),
    ("code_python", CODE_PY),
    ("code_cpp", CODE_CPP),
    ("code_json", CODE_JSON),
    ("url_email", "See https://example.com/a/b?c=d&e=f#frag or mail foo.bar+baz@example.org."),
    ("path", "C:\\Users\\me\\file.txt and /usr/local/lib/libfoo.so.1"),
    # whitespace of every kind
    ("tabs", "a\tb\t\tc\t\t\td\t"),
    ("crlf", "line1\r\nline2\r\n\r\nline3\r"),
    ("newlines", "\n\na\n\n\nb\n"),
    ("many_spaces", "a" + " " * 17 + "b" + " " * 3 + "c   "),
    ("leading_trailing_spaces", "   leading and trailing   "),
    ("only_spaces", "        "),
    ("only_newlines", "\n\n\n\n"),
    ("only_tabs", "\t\t\t"),
    ("mixed_ws", " \t \n \r\n\t\t \x0b\x0c x \x85 y"),
    ("nbsp", "a\u00a0b\u00a0\u00a0c \u00a0 d"),
    ("ideographic_space", "日本\u3000語\u3000\u3000テスト"),
    ("unicode_spaces", "a\u2000b\u2001c\u2002d\u2003e\u2009f\u200ag\u202fh\u205fi\u1680j"),
    ("zero_width", "zero\u200bwidth\u200cnon\u200djoiner\ufeffbom\u2060wj"),
    ("line_para_sep", "a\u2028b\u2029c"),
    ("space_before_newline", "end   \n  next \t\n"),
    # scripts
    ("cjk_chinese", "我爱自然语言处理。今天天气很好，我们去公园散步吧！"),
    ("cjk_japanese", "東京は日本の首都です。ひらがなとカタカナ、そして漢字。"),
    ("cjk_korean", "안녕하세요, 세계! 한국어 텍스트입니다."),
    ("arabic", "مرحبا بالعالم! هذه جملة عربية مع أرقام ١٢٣ وتشكيل: كَتَبَ"),
    ("hebrew", "שלום עולם, זה טקסט בעברית."),
    ("cyrillic", "Привет, мир! Съешь же ещё этих мягких французских булок, да выпей чаю."),
    ("greek", "Γειά σου Κόσμε! Ελληνικά με τόνους: άέήίόύώ ΐΰ"),
    ("devanagari", "नमस्ते दुनिया, यह हिंदी है।"),
    ("thai", "สวัสดีชาวโลก ภาษาไทยไม่มีช่องว่างระหว่างคำ"),
    ("vietnamese", "Tiếng Việt có dấu: Xin chào thế giới, Nguyễn Đức Thắng."),
    ("mixed_scripts", "English, 中文, русский, العربية, 日本語 and 한국어 in one line."),
    # normalization
    ("combining_nfd", "e\u0301 a\u0300 o\u0308 n\u0303 A\u030a (NFD) vs é à ö ñ Å"),
    ("combining_stack", "Z\u0351\u036b\u0343\u036a\u0302\u036b\u033d\u034f\u0334\u0319\u0324\u031e\u0349\u035a\u032f\u031e"),
    ("hangul_jamo", "\u1100\u1161\u11a8 \u1112\u1161\u11ab"),
    ("compat_chars", "ﬁ ﬂ ﬃ ℌ ℍ ① ™ ㎏ ㍻ Ⅳ ｶﾞ"),
    ("fullwidth", "ＡＢＣ ａｂｃ １２３ ！？（）［］ ＠＃＄％"),
    ("halfwidth_katakana", "ﾃｽﾄ ｶﾀｶﾅ"),
    ("ligature_case", "Straße STRASSE İstanbul ΣΊΣΥΦΟΣ ǅ"),
    # emoji
    ("emoji_simple", "I love 🍕 and 🚀! 😀😃😄"),
    ("emoji_zwj_family", "👨‍👩‍👧‍👦 family, 👩‍💻 coder, 🏳️‍🌈 flag, 🧑🏽‍🚀 astronaut"),
    ("emoji_skin_tones", "👍🏻👍🏼👍🏽👍🏾👍🏿"),
    ("emoji_flags_keycaps", "🇫🇷🇯🇵🇺🇸 1️⃣ #️⃣ ©️ ™️"),
    ("emoji_no_spaces", "🙂🙃😉😊😇🥰😍🤩😘😗☺😚😙🥲"),
    ("symbols", "→ ← ↑ ↓ ∑ ∫ √ ∞ ≠ ≤ ≥ ± × ÷ ° € £ ¥ ₹ ₿ § ¶ † ‡ • … ‰ ′ ″"),
    ("math_alnum", "𝐀𝐁𝐂 𝑎𝑏𝑐 𝔸𝔹ℂ 𝒜"),
    ("rare_planes", "𓀀𓀁 𠀀𠀁 \U000e0041 \U0010fffd"),
    ("private_use", "\ue000\uf8ff"),
    ("control_chars", "a\x00b\x01c\x07d\x1be\x7ff"),
    ("replacement_char", "bad \ufffd char"),
    # long words
    ("long_a", "a" * 3000),
    ("long_random_word", _random_word(2500, "abcdefghijklmnopqrstuvwxyz")),
    ("long_mixed_case", _random_word(1200, "aAbBcCdDeEfF")),
    ("long_digits", "1234567890" * 120),
    ("long_base64", _random_word(1600, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") + "=="),
    ("long_cjk_run", "".join(chr(0x4E00 + RANDOM.randrange(0, 2000)) for _ in range(800))),
    ("long_emoji_run", "😀" * 300),
    ("long_spaces", " " * 1000 + "x"),
    ("long_newlines", "\n" * 300 + "y"),
    ("long_punct", "!?" * 500),
    ("long_url", "https://example.com/" + "/".join(_random_word(12, "abcdefghij0123") for _ in range(80))),
    ("markdown", "# Title\n\n* item **bold** _it_ `code`\n\n```python\nx = 1\n```\n\n| a | b |\n|---|---|\n| 1 | 2 |\n"),
    ("html", "<div class=\"x\">Hello &amp; <b>bye</b></div><br/>"),
    ("lookalike_special", "<|not_special|> <s > </s x> [INST ] <unk> <0x41> ▁ ▁▁x"),
    ("metaspace_char", "▁hello ▁ world▁"),
    ("latex", "$$\\int_0^\\infty e^{-x^2}\\,dx = \\frac{\\sqrt{\\pi}}{2}$$"),
]

SYLLABLES = [
    "the", "in", "ter", "ing", "tion", "re", "con", "pro", "ab", "ly", "ment", "ous", "com", "ex", "pre", "un", "de",
    "ble", "al", "er", "an", "or", "st", "qu", "Th", "Wh", "Pr", "sch", "ü", "ß", "ei", "é", "ç", "qu'", "при", "вет",
    "ст", "ов", "ка", "ни", "κα", "λη", "μέ", "مر", "حب", "ال", "中", "文", "字", "日本", "語", "한", "국어", "1", "42",
    "2024", "3.14", "_", "()", "->", "::", "0x", "😀", "👍🏽", "'s", "n't", "é", "\u00a0", "ﬁ", "Ａ",
]
ENDERS = [". ", ", ", "! ", "? ", "\n", ".\n\n", "\t", "  ", ": ", "; ", "\r\n", " "]

MASK64 = (1 << 64) - 1


class SplitMix64:
    """The bench corpus generator's random numbers; the C++ side implements the same few lines."""

    def __init__(self, seed: int):
        self.state = seed & MASK64

    def next(self) -> int:
        self.state = (self.state + 0x9E3779B97F4A7C15) & MASK64
        z = self.state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
        return z ^ (z >> 31)


def fnv1a64(data: bytes) -> str:
    h = 0xCBF29CE484222325
    for b in data:
        h ^= b
        h = (h * 0x100000001B3) & MASK64
    return f"{h:016x}"


def fnv1a64_ids(ids) -> str:
    """FNV-1a over the ids as little-endian int32 bytes."""
    import array

    a = array.array("i", ids)
    if sys.byteorder != "little":
        a.byteswap()
    return fnv1a64(a.tobytes())


def bench_lines() -> list[str]:
    seen = set()
    lines = []
    for _, text in BASE_CASES:
        for line in text.split("\n"):
            if line and len(line) <= 400 and line not in seen:
                seen.add(line)
                lines.append(line)
    return lines


def make_bench_corpus(target_bytes: int, seed: int, line_percent: int, lines: list[str]) -> bytes:
    """Deterministic text: lines of the test corpus mixed with synthetic words. Spec for C++:
    loop while size < target: r = next(); if r % 100 < line_percent: append lines[next() % L] + "\\n"
    else: n = 1 + next() % 12 words, separated by " ", each 1 + next() % 4 syllables picked by next() % S,
    then enders[next() % E]. Everything is UTF-8; the text is never cut."""
    rng = SplitMix64(seed)
    lines_b = [s.encode() for s in lines]
    syl_b = [s.encode() for s in SYLLABLES]
    end_b = [s.encode() for s in ENDERS]
    out = bytearray()
    while len(out) < target_bytes:
        r = rng.next()
        if r % 100 < line_percent:
            out += lines_b[rng.next() % len(lines_b)]
            out += b"\n"
        else:
            n = 1 + rng.next() % 12
            for i in range(n):
                if i:
                    out += b" "
                k = 1 + rng.next() % 4
                for _ in range(k):
                    out += syl_b[rng.next() % len(syl_b)]
            out += end_b[rng.next() % len(end_b)]
    return bytes(out)


# ----------------------------------------------------------------------------------------------------------------
# Training
# ----------------------------------------------------------------------------------------------------------------


def training_corpus(max_bytes: int) -> list[str]:
    texts: list[str] = []
    total = 0
    stdlib = sysconfig.get_paths().get("stdlib") or os.path.dirname(os.__file__)
    files = sorted(glob.glob(os.path.join(stdlib, "*.py")) + glob.glob(os.path.join(stdlib, "*", "*.py")))
    for f in files:
        try:
            with open(f, encoding="utf-8") as fh:
                t = fh.read()
        except (OSError, UnicodeDecodeError):
            continue
        texts.append(t)
        total += len(t)
        if total >= max_bytes:
            break
    # The multilingual strings, several times, so their characters and common pieces get merges.
    for _ in range(8):
        for _, t in BASE_CASES:
            if len(t) < 500:
                texts.append(t)
    print(f"training corpus: {len(texts)} texts, {total} chars from {stdlib}", flush=True)
    return texts


def train_bytelevel(corpus: list[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    tok.post_processor = processors.ByteLevel(trim_offsets=False)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=["<|endoftext|>", "<|im_start|>", "<|im_end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    # Qwen3 style: <think> is an added token that is not special.
    tok.add_tokens([AddedToken("<think>", special=False, normalized=False)])
    tok.add_tokens([AddedToken("</think>", special=False, normalized=False)])
    return tok


def train_metaspace(corpus: list[str], vocab_size: int) -> Tokenizer:
    tok = Tokenizer(models.BPE(unk_token="<unk>", byte_fallback=True, fuse_unk=True))
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        min_frequency=2,
        show_progress=False,
        special_tokens=["<unk>", "<s>", "</s>"],
        limit_alphabet=150,  # rare characters are left to byte fallback
    )
    tok.train_from_iterator(corpus, trainer=trainer)
    j = json.loads(tok.to_str())
    vocab = j["model"]["vocab"]
    next_id = max(vocab.values()) + 1
    for b in range(256):
        name = f"<0x{b:02X}>"
        if name not in vocab:
            vocab[name] = next_id
            next_id += 1
    j["model"]["byte_fallback"] = True
    j["model"]["fuse_unk"] = True
    j["model"]["unk_token"] = "<unk>"
    tok = Tokenizer.from_str(json.dumps(j, ensure_ascii=False))
    # Mistral (non-legacy) layout: Metaspace without split, Llama decoder chain, BOS from the template.
    tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=False)
    tok.decoder = llama_decoder()
    tok.add_special_tokens(["[INST]", "[/INST]"])
    bos = tok.token_to_id("<s>")
    tok.post_processor = processors.TemplateProcessing(
        single="<s> $A", pair="<s> $A <s> $B", special_tokens=[("<s>", bos)]
    )
    return tok


def llama_decoder():
    return decoders.Sequence(
        [decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse(), decoders.Strip(" ", 1, 0)]
    )


# ----------------------------------------------------------------------------------------------------------------
# Variants: one more component each
# ----------------------------------------------------------------------------------------------------------------


def clone(tok: Tokenizer) -> Tokenizer:
    return Tokenizer.from_str(tok.to_str())


def without(tok: Tokenizer, *fields: str) -> Tokenizer:
    """A copy with the named top-level components set to null (via JSON: setters may not take None)."""
    j = json.loads(tok.to_str())
    for f in fields:
        j[f] = None
    return Tokenizer.from_str(json.dumps(j, ensure_ascii=False))


def edit_model(tok: Tokenizer, fn) -> Tokenizer:
    j = json.loads(tok.to_str())
    fn(j["model"])
    return Tokenizer.from_str(json.dumps(j, ensure_ascii=False))


def merges_as_strings(model: dict) -> None:
    merges = model["merges"]
    if merges and isinstance(merges[0], list):
        if any(" " in a or " " in b for a, b in merges):
            raise RuntimeError("a merge part holds a space; cannot write merges as 'a b' strings")
        model["merges"] = [f"{a} {b}" for a, b in merges]


def bytelevel_split(pattern, behavior: str, invert: bool = False):
    return pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(pattern, behavior=behavior, invert=invert),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )


def make_variants(bl: Tokenizer, ms: Tokenizer) -> dict[str, Tokenizer]:
    v: dict[str, Tokenizer] = {}
    im_start, im_end = bl.token_to_id("<|im_start|>"), bl.token_to_id("<|im_end|>")

    v["bytelevel_merges_str"] = edit_model(bl, merges_as_strings)

    t = without(edit_model(bl, lambda m: m.__setitem__("ignore_merges", True)), "normalizer")
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(LLAMA3_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    t.post_processor = processors.Sequence(
        [
            processors.ByteLevel(trim_offsets=False),
            processors.TemplateProcessing(
                single="<|im_start|> $A <|im_end|>",
                pair="<|im_start|> $A <|im_end|> $B:1 <|im_end|>:1",
                special_tokens=[("<|im_start|>", im_start), ("<|im_end|>", im_end)],
            ),
        ]
    )
    v["bytelevel_llama3_ignore_merges"] = t

    t = without(bl, "normalizer")
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)
    v["gpt2_prefix_space"] = t

    t = without(bl, "normalizer")
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    t.post_processor = processors.RobertaProcessing(("<|im_end|>", im_end), ("<|im_start|>", im_start))
    v["gpt2_roberta"] = t

    t = clone(bl)
    t.post_processor = processors.BertProcessing(("<|im_end|>", im_end), ("<|im_start|>", im_start))
    v["bytelevel_bert_processing"] = t

    t = without(bl, "normalizer")
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [pre_tokenizers.Split(Regex(r), behavior="isolated", invert=False) for r in DEEPSEEK_REGEXES]
        + [pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)]
    )
    v["deepseek_style"] = t

    ws_punct = Regex(r"\s+|[\p{P}\p{S}]")
    for behavior in ["removed", "merged_with_previous", "merged_with_next", "contiguous"]:
        t = clone(bl)
        t.pre_tokenizer = bytelevel_split(ws_punct, behavior)
        v[f"split_{behavior}"] = t
    t = clone(bl)
    t.pre_tokenizer = bytelevel_split(Regex(r"\p{L}+"), "isolated", invert=True)
    v["split_isolated_invert"] = t
    t = clone(bl)
    t.pre_tokenizer = bytelevel_split(Regex(r"\p{L}+"), "removed", invert=True)
    v["split_removed_invert"] = t
    t = clone(bl)
    t.pre_tokenizer = bytelevel_split(" ", "merged_with_next")  # a literal string pattern
    v["split_string_merged_with_next"] = t

    t = clone(bl)
    t.normalizer = normalizers.Sequence(
        [
            normalizers.NFKC(),
            normalizers.Lowercase(),
            normalizers.Replace(Regex(r"[ \t]{2,}"), " "),
            normalizers.Replace("ö", "oe"),
        ]
    )
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=True),
            pre_tokenizers.Split(Regex(QWEN2_REGEX), behavior="isolated", invert=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    v["nfkc_lowercase_digits"] = t

    t = clone(bl)
    t.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Digits(individual_digits=False),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True),
        ]
    )
    v["digits_grouped_bytelevel_regex"] = t

    t = clone(bl)
    t.normalizer = normalizers.Sequence([normalizers.NFC(), normalizers.Lowercase()])
    t.add_special_tokens([AddedToken("<mask>", lstrip=True, special=True)])
    t.add_special_tokens([AddedToken("[RS]", rstrip=True, special=True)])
    t.add_special_tokens([AddedToken("<both>", lstrip=True, rstrip=True, special=True)])
    t.add_tokens([AddedToken("foo", single_word=True, normalized=False)])
    t.add_tokens([AddedToken("über", normalized=True)])
    t.add_tokens([AddedToken("<a>", normalized=False)])
    t.add_tokens([AddedToken("<a><b>", normalized=False)])
    t.add_tokens([AddedToken("  ", normalized=False)])
    v["added_token_flags"] = t

    v["metaspace_merges_str"] = edit_model(ms, merges_as_strings)

    t = without(ms, "pre_tokenizer")
    t.normalizer = normalizers.Sequence([normalizers.Prepend("▁"), normalizers.Replace(" ", "▁")])
    v["llama_legacy"] = t

    t = clone(ms)
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="always", split=True)
    t.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="always", split=True)])
    v["metaspace_always_split"] = t

    t = clone(ms)
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="never", split=True)
    t.decoder = decoders.Sequence(
        [decoders.ByteFallback(), decoders.Fuse(), decoders.Metaspace(replacement="▁", prepend_scheme="never", split=True)]
    )
    t = without(t, "post_processor")
    v["metaspace_never"] = t

    t = clone(ms)
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="▁", prepend_scheme="first", split=True)
    t.decoder = decoders.Sequence([decoders.ByteFallback(), decoders.Metaspace(replacement="▁", prepend_scheme="first", split=True)])
    eos = t.token_to_id("</s>")
    bos = t.token_to_id("<s>")
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> $B </s>", special_tokens=[("<s>", bos), ("</s>", eos)]
    )
    v["metaspace_first_split_bos_eos"] = t

    v["bpe_unk_fused"] = edit_model(ms, lambda m: m.update(byte_fallback=False, fuse_unk=True))
    v["bpe_unk_unfused"] = edit_model(ms, lambda m: m.update(byte_fallback=False, fuse_unk=False))

    t = clone(ms)
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(r"\s+"), " ")])
    v["metaspace_nfkc_replace"] = t
    return v


# ----------------------------------------------------------------------------------------------------------------
# Recording
# ----------------------------------------------------------------------------------------------------------------


def special_cases(tok: Tokenizer) -> list[tuple[str, str]]:
    """Added tokens inside text: every added token (up to 12) in a few contexts."""
    added = tok.get_added_tokens_decoder()
    contents = [added[i].content for i in sorted(added)]
    if len(contents) > 12:
        contents = contents[:6] + contents[-6:]
    cases = []
    for k, c in enumerate(contents):
        cases.append((f"added_{k}_inside", f"Hello{c}world"))
        cases.append((f"added_{k}_spaced", f"Hello {c} world \n{c}\n"))
        cases.append((f"added_{k}_twice", f"{c}{c} {c}"))
        cases.append((f"added_{k}_in_word", f"xx{c}yy {c}zz {c}"))
    if len(contents) >= 2:
        cases.append(("added_all", " ".join(contents) + "".join(contents)))
    cases.append(("added_chat", "".join(f"{c}user\nHi there!{c}\n" for c in contents[:3])))
    cases.append(("single_word_probe", "foo foolish (foo) afoo foo_bar foo. Foo FOO über Über <a><b> <a>b   x"))
    return cases


def decode_or_error(tok, ids, skip):
    try:
        return tok.decode(ids, skip_special_tokens=skip)
    except Exception as e:  # recorded: our side must fail too, or we note the difference
        return {"error": str(e)}


def stream_steps(tok, ids):
    try:
        from tokenizers.decoders import DecodeStream
    except ImportError:
        return None
    try:
        ds = DecodeStream(skip_special_tokens=False)
        return [ds.step(tok, i) for i in ids]
    except Exception as e:
        return {"error": str(e)}


def record(tok: Tokenizer, name: str, tokenizer_path: str) -> dict:
    cases = []
    for cname, text in BASE_CASES + special_cases(tok):
        enc = tok.encode(text, add_special_tokens=False)
        enc_sp = tok.encode(text, add_special_tokens=True)
        case = {
            "name": cname,
            "text": text,
            "ids": enc.ids,
            "tokens": enc.tokens,
            "ids_special": enc_sp.ids,
            "decoded": decode_or_error(tok, enc.ids, False),
            "decoded_special": decode_or_error(tok, enc_sp.ids, False),
            "decoded_special_skip": decode_or_error(tok, enc_sp.ids, True),
        }
        if len(enc_sp.ids) <= 200:
            steps = stream_steps(tok, enc_sp.ids)
            if steps is not None:
                case["stream_steps"] = steps
        cases.append(case)

    n = tok.get_vocab_size(with_added_tokens=True)
    rng = random.Random(7)
    decode_cases = []
    for _ in range(60):
        ids = [rng.randrange(n) for _ in range(rng.randint(1, 8))]
        decode_cases.append(
            {"ids": ids, "decoded": decode_or_error(tok, ids, False), "decoded_skip": decode_or_error(tok, ids, True)}
        )
    prefix_decodes = []
    for text in ["€ 😀 👨‍👩‍👧 日本語 é", "ﬁ\u00a0Ω\u3000𓀀", " \n\t x"]:
        ids = tok.encode(text, add_special_tokens=False).ids
        prefix_decodes.append(
            {"text": text, "ids": ids, "prefixes": [decode_or_error(tok, ids[:k], False) for k in range(1, len(ids) + 1)]}
        )
    added = tok.get_added_tokens_decoder()
    return {
        "name": name,
        "tokenizer": tokenizer_path,
        "tokenizers_version": tokenizers.__version__,
        "vocab_size": tok.get_vocab_size(with_added_tokens=False),
        "vocab_size_with_added": n,
        "added_tokens": [
            {"id": i, "content": added[i].content, "special": bool(getattr(added[i], "special", False))} for i in sorted(added)
        ],
        "cases": cases,
        "decode_cases": decode_cases,
        "prefix_decodes": prefix_decodes,
    }


def write_json(path: Path, obj, compress_over: int | None = None) -> Path:
    data = json.dumps(obj, ensure_ascii=False, indent=None, separators=(",", ":")).encode()
    if compress_over is not None and len(data) > compress_over:
        path = path.with_name(path.name + ".xz")
        path.write_bytes(lzma.compress(data, preset=9 | lzma.PRESET_EXTREME))
    else:
        path.write_bytes(data)
    return path


def load_real(path: Path) -> Tokenizer:
    data = path.read_bytes()
    if path.name.endswith(".xz"):
        data = lzma.decompress(data)
    return Tokenizer.from_str(data.decode("utf-8"))


def time_encode(tok: Tokenizer, text: str, chunks: list[str], repeats: int) -> dict:
    whole = []
    ids = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        enc = tok.encode(text, add_special_tokens=False)
        whole.append(time.perf_counter() - t0)
        ids = enc.ids
    lines = []
    line_ids = None
    for _ in range(repeats):
        t0 = time.perf_counter()
        encs = tok.encode_batch(chunks, add_special_tokens=False)
        lines.append(time.perf_counter() - t0)
        line_ids = [i for e in encs for i in e.ids]
    return {
        "whole_seconds": whole,
        "whole_seconds_best": min(whole),
        "whole_tokens": len(ids),
        "whole_ids_fnv1a64": fnv1a64_ids(ids),
        "lines_seconds": lines,
        "lines_seconds_best": min(lines),
        "lines_tokens": len(line_ids),
        "lines_ids_fnv1a64": fnv1a64_ids(line_ids),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("out_dir", type=Path)
    default_real = Path(__file__).resolve().parents[1] / "tests" / "data" / "tokenizer" / "real"
    ap.add_argument("--real-dir", type=Path, default=default_real)
    ap.add_argument("--bench-mb", type=float, default=10.0)
    ap.add_argument("--bench-repeats", type=int, default=3)
    ap.add_argument("--train-mb", type=float, default=4.0)
    ap.add_argument("--write-bench-text", action="store_true", help="also write bench_corpus.txt (not for the repo)")
    args = ap.parse_args()

    out: Path = args.out_dir
    (out / "trained").mkdir(parents=True, exist_ok=True)
    (out / "golden").mkdir(parents=True, exist_ok=True)
    errors: list[str] = []
    print(f"tokenizers {tokenizers.__version__}, python {platform.python_version()}", flush=True)

    tokenizers_to_record: list[tuple[str, Tokenizer, str]] = []
    corpus = training_corpus(int(args.train_mb * 1e6))
    bl = ms = None
    try:
        bl = train_bytelevel(corpus, 3000)
        ms = train_metaspace(corpus, 2500)
    except Exception:
        errors.append("training failed:\n" + traceback.format_exc())
    trained: dict[str, Tokenizer] = {}
    if bl is not None and ms is not None:
        trained["bytelevel_bpe"] = bl
        trained["metaspace_bpe"] = ms
        try:
            trained.update(make_variants(bl, ms))
        except Exception:
            errors.append("variants failed:\n" + traceback.format_exc())
    for name, tok in trained.items():
        rel = f"trained/{name}.json.xz"
        (out / rel).write_bytes(lzma.compress(tok.to_str().encode(), preset=9 | lzma.PRESET_EXTREME))
        tokenizers_to_record.append((name, tok, rel))

    real_files = []
    if args.real_dir.is_dir():
        real_files = sorted(p for p in args.real_dir.iterdir() if p.name.endswith((".json", ".json.xz")))
    else:
        errors.append(f"--real-dir {args.real_dir} does not exist: no real tokenizers recorded")
    for p in real_files:
        name = "real_" + p.name.removesuffix(".xz").removesuffix(".json")
        try:
            tokenizers_to_record.append((name, load_real(p), f"real/{p.name}"))
        except Exception:
            errors.append(f"loading {p} failed:\n" + traceback.format_exc())

    goldens = []
    for name, tok, rel in tokenizers_to_record:
        t0 = time.perf_counter()
        try:
            path = write_json(out / "golden" / f"{name}.json", record(tok, name, rel), compress_over=0)
            goldens.append(path.name)
            print(f"golden {path.name} ({time.perf_counter() - t0:.1f}s)", flush=True)
        except Exception:
            errors.append(f"recording {name} failed:\n" + traceback.format_exc())

    # 10 MB timing.
    lines = bench_lines()
    seed, line_percent = 0x5EED1E55, 55
    target = int(args.bench_mb * 1_000_000)
    corpus_bytes = make_bench_corpus(target, seed, line_percent, lines)
    text = corpus_bytes.decode("utf-8")
    pieces = text.split("\n")
    chunks = [p + "\n" for p in pieces[:-1]] + ([pieces[-1]] if pieces[-1] else [])
    if args.write_bench_text:
        (out / "bench_corpus.txt").write_bytes(corpus_bytes)
    bench = {
        "generator": {
            "algorithm": "splitmix64; see make_bench_corpus in tools/make_tokenizer_goldens.py",
            "seed": seed,
            "target_bytes": target,
            "line_percent": line_percent,
        },
        "lines": lines,
        "syllables": SYLLABLES,
        "enders": ENDERS,
        "bytes": len(corpus_bytes),
        "fnv1a64": fnv1a64(corpus_bytes),
        "chunks": "text split after every \\n (the \\n stays with its line)",
        "tokenizers_version": tokenizers.__version__,
        "python": platform.python_version(),
        "machine": platform.platform(),
        "cpu": platform.processor(),
        "results": {},
    }
    bench_names = ["bytelevel_bpe", "metaspace_bpe"] + [n for n, _, r in tokenizers_to_record if r.startswith("real/")]
    for name, tok, rel in tokenizers_to_record:
        if name not in bench_names:
            continue
        try:
            r = time_encode(tok, text, chunks, args.bench_repeats)
            r["tokenizer"] = rel
            bench["results"][name] = r
            print(f"bench {name}: {r['whole_seconds_best']:.3f}s whole, {r['lines_seconds_best']:.3f}s lines", flush=True)
        except Exception:
            errors.append(f"bench {name} failed:\n" + traceback.format_exc())
    write_json(out / "bench.json", bench)

    manifest = {
        "tokenizers_version": tokenizers.__version__,
        "python": platform.python_version(),
        "goldens": goldens,
        "errors": errors,
        "made_at": time.strftime("%Y-%m-%d %H:%M:%S"),
    }
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1, ensure_ascii=False))
    for e in errors:
        print("ERROR:", e, file=sys.stderr)
    print(f"wrote {len(goldens)} goldens to {out}; {len(errors)} errors", flush=True)
    return 0 if bl is not None and ms is not None and goldens else 1


if __name__ == "__main__":
    sys.exit(main())
