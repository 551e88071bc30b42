#!/bin/sh
set -e
rm -rf ./tmp-build
mkdir -p ./tmp-build
echo done
