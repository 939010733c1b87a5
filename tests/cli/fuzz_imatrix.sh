#!/usr/bin/env bash
# Fuzzes imatrix files against qwen3_moe_a's config (tests/fuzz/fuzz_imatrix.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_imatrix/.
# Usage: fuzz_imatrix.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_imatrix
fuzz_run fuzz_imatrix
