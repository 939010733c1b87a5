#!/usr/bin/env bash
# Fuzzes imatrix files through Imatrix::load (tests/fuzz/fuzz_imatrix.cpp) with
# libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_imatrix/.
# Usage: fuzz_imatrix.sh [seedling-binary] [data-dir] (the arguments ctest passes; unused).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
model="$fuzz_root/tests/data/models/qwen3_moe_a/hf"
fuzz_build fuzz_imatrix "-DSEEDLING_FUZZ_MODEL=\"$model\"" src/model/imatrix.cpp src/io/safetensors.cpp \
  src/io/safetensors_writer.cpp src/core/mapped_file.cpp src/core/dtype.cpp "${families[@]}" -lfmt
fuzz_run fuzz_imatrix 16384
