#!/usr/bin/env bash
# Fuzzes the GGUF reader (tests/fuzz/fuzz_gguf.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15)
# over tests/fuzz/corpus/fuzz_gguf/.
# Usage: fuzz_gguf.sh [seedling-binary] [data-dir] (the arguments ctest passes; unused).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_gguf src/io/gguf.cpp src/core/mapped_file.cpp -lfmt
fuzz_run fuzz_gguf 16384
