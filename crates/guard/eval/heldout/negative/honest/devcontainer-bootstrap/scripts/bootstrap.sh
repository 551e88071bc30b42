#!/usr/bin/env bash
set -euo pipefail
curl -fsSL https://get.docker.com | sh
curl -fsSL https://bun.sh/install | bash
curl -fsSL https://deno.land/install.sh | sh
curl -LsSf https://astral.sh/uv/install.sh | sh
