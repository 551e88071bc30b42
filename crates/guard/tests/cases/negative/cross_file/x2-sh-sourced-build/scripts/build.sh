#!/usr/bin/env bash
set -euo pipefail
source "$(dirname "$0")/env.sh"
mkdir -p "$BUILD_DIR"
$CC $CFLAGS -o "$BUILD_DIR/app" src/main.c
echo "built $BUILD_DIR/app"
