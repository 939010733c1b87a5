#!/usr/bin/env bash
# Fuzzes the packed manifest through PackedModel::open (tests/fuzz/fuzz_packed_manifest.cpp) with
# libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_packed_manifest/.
# Usage: fuzz_packed_manifest.sh [seedling-binary] [data-dir] (the arguments ctest passes; unused).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_packed_manifest src/io/packed_model.cpp src/core/mapped_file.cpp src/core/dtype.cpp -lxxhash -lfmt
fuzz_run fuzz_packed_manifest 16384
