#!/bin/bash
set -euo pipefail
BUILD_DIR="${BUILD_DIR:-build}"
JOBS=$(nproc)
mkdir -p "$BUILD_DIR"
cmake -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release
cmake --build "$BUILD_DIR" -j "$JOBS"
"$BUILD_DIR/bin/selftest"
echo "built in $BUILD_DIR"
