#!/usr/bin/env bash
# Fuzzes the tokenizer (a tokenizer.json, text, ids) (tests/fuzz/fuzz_tokenizer.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_tokenizer/.
# Usage: fuzz_tokenizer.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_tokenizer
fuzz_run fuzz_tokenizer
