#!/usr/bin/env bash
# The install as a user meets it: `cmake --install` of this build into a fresh prefix, a project
# outside the tree (tests/install/consumer) configured with find_package(tracerun) against it,
# built, its annotated program traced by the *installed* launcher, and the trace read back through
# the installed tracerun::trace, checked against the installed `tracerun info --json`.
# Usage: install_test.sh BUILD_DIR SOURCE_DIR
set -euo pipefail
build=$(cd "$1" && pwd)
src=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/tracerun_install_XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

cmake --install "$build" --prefix "$prefix" >"$work/install.log"
"$prefix/bin/tracerun" --version | grep -q '^tracerun [0-9]' || { echo "FAIL: tracerun --version"; exit 1; }

cmake -S "$src/tests/install/consumer" -B "$work/consumer" -DCMAKE_PREFIX_PATH="$prefix" \
  -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 ||
  { cat "$work/configure.log"; echo "FAIL: the consumer project did not configure"; exit 1; }
cmake --build "$work/consumer" -j2 >"$work/build.log" 2>&1 ||
  { tail -40 "$work/build.log"; echo "FAIL: the consumer project did not build"; exit 1; }

# The installed launcher must find the installed libtracerun.so (at ../lib beside bin/tracerun).
steps=4
TRACERUN_LIBRARY= "$prefix/bin/tracerun" -q -o "$work/t.db" -- "$work/consumer/annotated_program" $steps
census=$("$work/consumer/span_census" "$work/t.db" consumer_step consumer_work)
echo "$census"
info_spans=$("$prefix/bin/tracerun" info --json "$work/t.db" |
  /usr/bin/python3 -c 'import json,sys; print(json.load(sys.stdin)["counts"]["spans"])')
read_spans=$(echo "$census" | awk '$1=="spans"{print $2}')
[ "$read_spans" = "$info_spans" ] || { echo "FAIL: spans $read_spans (installed reader) vs $info_spans (tracerun info)"; exit 1; }
[ "$(echo "$census" | awk '$1=="consumer_step"{print $2}')" = "$steps" ] || { echo "FAIL: consumer_step count"; exit 1; }
[ "$(echo "$census" | awk '$1=="consumer_work"{print $2}')" = "$steps" ] || { echo "FAIL: consumer_work count"; exit 1; }
echo "install test passed: $read_spans spans, $steps annotated steps"
