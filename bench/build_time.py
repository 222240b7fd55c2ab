#!/usr/bin/env python3
"""Compile and link time of a build's targets, summed from ninja's own log (docs/performance.md,
"Building"). It reads what the last build of each output took; it builds nothing and times nothing.

    /usr/bin/python3 bench/build_time.py BUILD_DIR [--log FILE] [--top N] [TARGET ...]

For each TARGET (default: tracerun_demo and all) it asks ninja which outputs the target needs
(`ninja -t inputs`, recursive) and sums end - start over the .ninja_log entries of those outputs.
An edge with several outputs (a custom command) is counted once. The log holds the LAST build of
each output: in a shared, incremental build folder that is whatever build touched it last, under
whatever load, with or without a ccache hit. --log reads another build's log (a cold build from a
fresh clone) against BUILD_DIR's graph; outputs are matched by their path relative to the build.
Not a timer: wall time on N cores is about the sum / N only when the jobs keep every core busy.
"""
import argparse
import collections
import os
import subprocess
import sys


def read_log(path):
    """{output: (start_ms, end_ms, hash)}, the last entry of each output (ninja log v5)."""
    entries = {}
    with open(path, encoding="utf-8") as f:
        header = f.readline()
        if not header.startswith("# ninja log v"):
            sys.exit("build_time.py: %s is not a .ninja_log" % path)
        for line in f:
            fields = line.rstrip("\n").split("\t")
            if len(fields) != 5:
                continue
            start, end, _mtime, output, cmd_hash = fields
            entries[output] = (int(start), int(end), cmd_hash)
    return entries


def needed_outputs(build_dir, target):
    """Every file the target needs, recursively, and the target itself (paths as ninja names them)."""
    result = subprocess.run(["ninja", "-C", build_dir, "-t", "inputs", target],
                            capture_output=True, text=True)
    if result.returncode != 0:
        sys.exit("build_time.py: ninja -t inputs %s failed: %s" % (target, result.stderr.strip()))
    names = set(result.stdout.split())
    names.add(target)
    # ninja names files inside the build folder relatively, others absolutely.
    prefix = os.path.abspath(build_dir) + os.sep
    return {n[len(prefix):] if n.startswith(prefix) else n for n in names}


def edges(entries, outputs):
    """[(seconds, output)] with one row per edge: outputs sharing start, end and hash are one job."""
    seen = {}
    for output in sorted(outputs):
        if output in entries:
            start, end, cmd_hash = entries[output]
            seen.setdefault((start, end, cmd_hash), output)
    return [((end - start) / 1000.0, output) for (start, end, _h), output in seen.items()]


def group_of(output):
    """The source folder an output belongs to: trace/CMakeFiles/x.dir/... -> trace."""
    head = output.split("/", 1)[0]
    return head if "/" in output and head != "CMakeFiles" else "(top)"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("build_dir")
    parser.add_argument("targets", nargs="*", default=["tracerun_demo", "all"])
    parser.add_argument("--log", help="the .ninja_log to read (default: BUILD_DIR/.ninja_log)")
    parser.add_argument("--top", type=int, default=12, help="the N longest jobs of the last target")
    args = parser.parse_intermixed_args()
    log = args.log or os.path.join(args.build_dir, ".ninja_log")
    if not os.path.isfile(log):
        sys.exit("build_time.py: no ninja log at %s" % log)
    entries = read_log(log)
    rows = {}
    for target in args.targets:
        needed = needed_outputs(args.build_dir, target)
        rows[target] = edges(entries, needed)
        total = sum(s for s, _ in rows[target])
        # Objects the graph needs and the log lacks: built by no logged build (another commit's log).
        missing = len([n for n in needed if n.endswith(".o") and n not in entries])
        print("%-16s %4d jobs in the log, %8.1f s compile+link, %d objects not in the log"
              % (target, len(rows[target]), total, missing))
    last = rows[args.targets[-1]]
    by_group = collections.Counter()
    for seconds, output in last:
        by_group[group_of(output)] += seconds
    print("\nby folder (%s):" % args.targets[-1])
    for group, seconds in by_group.most_common():
        print("  %-12s %8.1f s" % (group, seconds))
    print("\nlongest jobs (%s):" % args.targets[-1])
    for seconds, output in sorted(last, reverse=True)[:args.top]:
        print("  %7.1f s  %s" % (seconds, output))


if __name__ == "__main__":
    main()
