#!/usr/bin/env bash
# Checks that every C and C++ source follows .clang-format (the libnrt headers in
# runtime_shim/include/ keep the SDK's own layout), and that the Python code passes ruff:
# its formatter, and its linter with the rule set of pyproject.toml ([tool.ruff.lint]:
# pycodestyle, pyflakes, import order, bugbear, pyupgrade, comprehensions). With --fix,
# formats them in place.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
mapfile -t files < <(git ls-files '*.c' '*.cpp' '*.h' | grep -v '^runtime_shim/include/')
ruff=.venv/bin/ruff
mapfile -t python < <(git ls-files '*.py')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  "$ruff" format -q "${python[@]}"
  "$ruff" check -q --fix "${python[@]}"
  exit 0
fi
if ! "$ruff" format -q --check "${python[@]}" || ! "$ruff" check -q "${python[@]}"; then
  echo "format check failed: run scripts/check-format.sh --fix" >&2
  exit 1
fi
if ! clang-format --dry-run -Werror "${files[@]}" 2>/tmp/neuronsim-format.$$; then
  grep -E '^[^ ].*: error:' /tmp/neuronsim-format.$$ | cut -d: -f1 | sort -u | sed 's/^/needs formatting: /'
  rm -f /tmp/neuronsim-format.$$
  echo "format check failed: run scripts/check-format.sh --fix" >&2
  exit 1
fi
rm -f /tmp/neuronsim-format.$$
echo "format check: ${#files[@]} files follow .clang-format, ${#python[@]} Python files pass ruff"
