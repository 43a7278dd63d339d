#!/usr/bin/env bash
# `make test`: every phase of the suite in order, each timed, then one table of times and counts,
# so a slow phase shows in every CI log. Stops at the first phase that fails.
#
#   install   Python, npm and Debian packages, the test-time store server, WordPress
#   lint      ruff; ESLint and Prettier on the dashboard; php -l and phpcs on the plugin
#   embedded  the whole suite on the embedded store (mongomock-motor), in TEST_WORKERS processes
#   wire      the tests marked `wire` again through the real driver on SecantusDB
#             (tests/README.md says which run there and why)
set -uo pipefail
cd "$(dirname "$0")/.."

MAKE=${MAKE:-make}
PYTEST=(.venv/bin/python -m pytest -q -p no:cacheprovider)
# Two processes on two cores: most of the suite waits on browsers, WordPress and sockets.
WORKERS=${TEST_WORKERS:-2}
PARALLEL=(-n "$WORKERS" --dist loadgroup)
[ "$WORKERS" = 0 ] && PARALLEL=()

rows=()
passed_total=0
failed_total=0
started=$SECONDS

summary() {
  echo
  echo "=== make test: phases"
  printf '%-10s %8s  %s\n' phase seconds result
  for row in "${rows[@]}"; do printf '%s\n' "$row"; done
  printf '%-10s %8s\n' total "$((SECONDS - started))"
  # The closing line CI reads, in the plain form any runner's summary can take.
  echo "tests: ${passed_total} passed, ${failed_total} failed"
}

# count WORD TEXT: the number before WORD in pytest's closing line ("3 failed, 1 error"), or 0.
count() {
  local found
  found=$(grep -oE "[0-9]+ $1" <<<"$2" | head -n 1)
  echo "${found%% *}" | sed 's/^$/0/'
}

# phase NAME COMMAND...: run it, time it, keep pytest's closing line as its result.
phase() {
  local name=$1; shift
  local log; log=$(mktemp)
  local begun=$SECONDS
  echo "=== ${name}: $*"
  "$@" 2>&1 | tee "$log"
  local status=${PIPESTATUS[0]}
  local result
  result=$(grep -E '^[0-9]+ (passed|failed)|^=+ .*(passed|failed|error)' "$log" | tail -n 1 \
    | sed -E 's/^=+ //; s/ =+$//')
  rm -f "$log"
  passed_total=$((passed_total + $(count passed "$result")))
  failed_total=$((failed_total + $(count failed "$result") + $(count error "$result")))
  [ "$status" = 0 ] && result=${result:-ok} || result="FAILED (exit ${status}) ${result}"
  rows+=("$(printf '%-10s %8s  %s' "$name" "$((SECONDS - begun))" "$result")")
  if [ "$status" != 0 ]; then
    [ "$failed_total" = 0 ] && failed_total=1
    summary
    exit "$status"
  fi
}

phase install "$MAKE" --no-print-directory test-deps
phase lint "$MAKE" --no-print-directory lint plugin-lint
phase embedded "${PYTEST[@]}" "${PARALLEL[@]}"
phase wire "${PYTEST[@]}" "${PARALLEL[@]}" --store=wire -m wire
summary
