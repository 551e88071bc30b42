#!/usr/bin/env bash
set -uo pipefail

ts() { date +%s; }
c() { printf '\033[%sm' "$1"; }
pass() { echo "$(c 32)pass$(c 0) $1 ($(( $(ts) - $2 ))s)"; }
fail() { echo "$(c 31)FAIL$(c 0) $1 ($(( $(ts) - $2 ))s)"; failed=$((failed + 1)); }
head1() { sed -n 1p "$1"; }

failed=0
out="$(mktemp)"
trap 'rm -f "$out"' EXIT

t=$(ts); if shellcheck -x scripts/*.sh >"$out" 2>&1; then pass shellcheck "$t"; else fail shellcheck "$t"; head1 "$out"; fi
t=$(ts); if shfmt -d scripts >"$out" 2>&1; then pass shfmt "$t"; else fail shfmt "$t"; head1 "$out"; fi
t=$(ts); if ruff check . >"$out" 2>&1; then pass ruff "$t"; else fail ruff "$t"; head1 "$out"; fi
t=$(ts); if ruff format --check . >"$out" 2>&1; then pass ruff-format "$t"; else fail ruff-format "$t"; head1 "$out"; fi
t=$(ts); if mypy src >"$out" 2>&1; then pass mypy "$t"; else fail mypy "$t"; head1 "$out"; fi
t=$(ts); if npx --no-install eslint . >"$out" 2>&1; then pass eslint "$t"; else fail eslint "$t"; head1 "$out"; fi
t=$(ts); if npx --no-install prettier --check . >"$out" 2>&1; then pass prettier "$t"; else fail prettier "$t"; head1 "$out"; fi
t=$(ts); if npx --no-install tsc --noEmit >"$out" 2>&1; then pass tsc "$t"; else fail tsc "$t"; head1 "$out"; fi
t=$(ts); if hadolint Dockerfile >"$out" 2>&1; then pass hadolint "$t"; else fail hadolint "$t"; head1 "$out"; fi
t=$(ts); if yamllint -s . >"$out" 2>&1; then pass yamllint "$t"; else fail yamllint "$t"; head1 "$out"; fi
t=$(ts); if markdownlint-cli2 '**/*.md' >"$out" 2>&1; then pass markdownlint "$t"; else fail markdownlint "$t"; head1 "$out"; fi
t=$(ts); if actionlint >"$out" 2>&1; then pass actionlint "$t"; else fail actionlint "$t"; head1 "$out"; fi
t=$(ts); if taplo fmt --check >"$out" 2>&1; then pass taplo "$t"; else fail taplo "$t"; head1 "$out"; fi
t=$(ts); if cargo fmt --check >"$out" 2>&1; then pass rustfmt "$t"; else fail rustfmt "$t"; head1 "$out"; fi
t=$(ts); if cargo clippy -q -- -D warnings >"$out" 2>&1; then pass clippy "$t"; else fail clippy "$t"; head1 "$out"; fi
t=$(ts); if typos >"$out" 2>&1; then pass typos "$t"; else fail typos "$t"; head1 "$out"; fi
t=$(ts); if codespell -q 3 >"$out" 2>&1; then pass codespell "$t"; else fail codespell "$t"; head1 "$out"; fi
t=$(ts); if editorconfig-checker >"$out" 2>&1; then pass editorconfig "$t"; else fail editorconfig "$t"; head1 "$out"; fi

echo "$(c 1)$failed linter(s) failed$(c 0)"
[ "$failed" -eq 0 ]
