#!/bin/bash
set -euo pipefail
target="$1"
npm run build
rsync -az --delete dist/ "$target"
echo "deployed to $target"
