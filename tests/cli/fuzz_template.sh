#!/usr/bin/env bash
# Fuzzes chat templates, parsed and rendered (tests/fuzz/fuzz_template.cpp), with libFuzzer and ASan/UBSan for
# FUZZ_SECONDS (default 15), seeded with the real templates of tests/data/templates.
# Usage: fuzz_template.sh [seedling-binary] [data-dir] (the arguments ctest passes; the binary's folder holds the fuzz build).
# shellcheck source-path=SCRIPTDIR source=lib/fuzz.bash
source "$(dirname "$0")/lib/fuzz.bash"
fuzz_build fuzz_template
fuzz_run fuzz_template
