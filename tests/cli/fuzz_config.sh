#!/usr/bin/env bash
# Fuzzes config.json through read_model_config, every family's reader (tests/fuzz/fuzz_config.cpp) with
# libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_config/.
# Usage: fuzz_config.sh [seedling-binary] [data-dir] (the arguments ctest passes; unused).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_config "${families[@]}" src/core/mapped_file.cpp -lfmt
fuzz_run fuzz_config 8192
