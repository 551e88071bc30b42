#!/bin/sh
set -eu
CC="${CC:-cc}"
CFLAGS="${CFLAGS:--O2 -Wall}"
out="build"
mkdir -p "$out"
for src in src/*.c; do
  obj="$out/$(basename "$src" .c).o"
  $CC $CFLAGS -c "$src" -o "$obj"
done
$CC -o "$out/helper" "$out"/*.o
tool="str""ip"
"$tool" "$out/helper"
echo "built $out/helper"
