#!/usr/bin/env bash
# Fuzzes config.json through every family's reader (tests/fuzz/fuzz_config.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_config/.
# Usage: fuzz_config.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_config
fuzz_run fuzz_config
