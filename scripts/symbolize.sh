#!/usr/bin/env bash
# Symbolizes the backtraces TRACERUN_CRASH_BACKTRACE=1 prints (interpose/src/crash_backtrace.h):
# every "LIB(+0xOFFSET)[...]" line of the given logs (or stdin) becomes "LIB: function at
# file:line" through addr2line, for crashes on machines without a debugger (the GPU machine).
#
#   bash scripts/symbolize.sh build-gpu/tests/gpu/*/*.log
set -uo pipefail
command -v addr2line >/dev/null || { echo "symbolize: addr2line not found (binutils)"; exit 1; }
# Each distinct frame is looked up once (addr2line on a 1 GB libtorch_cuda.so takes seconds, and
# the crashes of one fault repeat the same frames).
declare -A seen
while IFS= read -r line; do
  lib=${line%%(*}
  off=${line#*(+}; off=${off%%)*}
  [ -f "$lib" ] || { echo "$line"; continue; }
  key="$lib $off"
  [ -n "${seen[$key]+x}" ] ||
    seen[$key]="$(basename "$lib") $off: $(addr2line -Cfipe "$lib" "$off" 2>/dev/null | head -3 | tr '\n' ' ')"
  echo "${seen[$key]}"
done < <(cat "$@" | grep -E '^\S+\(\+0x[0-9a-f]+\)\[')
