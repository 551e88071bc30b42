# Build settings.
CC="${CC:-cc}"
CFLAGS="-O2 -Wall"
BUILD_DIR="build"
