#!/usr/bin/env bash
# Fuzzes the packed manifest (tests/fuzz/fuzz_packed_manifest.cpp) with libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over
# tests/fuzz/corpus/fuzz_packed_manifest/.
# Usage: fuzz_packed_manifest.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_packed_manifest
fuzz_run fuzz_packed_manifest
