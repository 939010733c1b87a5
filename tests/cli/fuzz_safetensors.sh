#!/usr/bin/env bash
# Fuzzes the safetensors header (tests/fuzz/fuzz_safetensors.cpp) with
# libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_safetensors/.
# Usage: fuzz_safetensors.sh [seedling-binary] [data-dir] (the arguments ctest passes; unused).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_safetensors src/io/safetensors.cpp src/core/mapped_file.cpp src/core/dtype.cpp -lfmt
fuzz_run fuzz_safetensors 65536
