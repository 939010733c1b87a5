#!/usr/bin/env bash
# Fuzzes the JSON Schema compiler and the JSON matcher of structured output (tests/fuzz/fuzz_json_schema.cpp) with
# libFuzzer and ASan/UBSan for FUZZ_SECONDS (default 15) over tests/fuzz/corpus/fuzz_json_schema/.
# Usage: fuzz_json_schema.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_json_schema
fuzz_run fuzz_json_schema
