#!/usr/bin/env bash
# Fuzzes the GGUF reader and the mapping of its metadata onto a family and a tokenizer (tests/fuzz/fuzz_gguf.cpp)
# with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_gguf/.
# Usage: fuzz_gguf.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_gguf
fuzz_run fuzz_gguf
