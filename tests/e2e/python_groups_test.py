"""Two process groups making identical calls at the same time, in an unmodified torch.distributed
program (python_groups_prog.py, 4 ranks, Gloo), told apart in the trace and the report.
ctest: e2e_python_groups (tests/e2e/CMakeLists.txt).

The truth is what torch itself says of each rank's group (dist.get_rank(group),
get_world_size(group), the members the program gave new_group, torch's name of the group), printed
by the program. Per layout ({0,1},{2,3}; {0,2},{1,3}; and {0,3},{1,2}, whose places are the strided
layout's: only the groups' names tell it apart):
- every backend span (gloo:*) and every dispatcher op (c10d::*) of a rank carries that rank's
  group size, place and name (group_size, group_rank, group_id: torch's counter name as a number);
  a world barrier the world's;
- the report's collective rows name exactly the program's groups (never [0,1,2,3] for a
  2-rank group's all-reduce, which is what matching by time alone gave: docs/report.md "Groups"),
  scatter's too (the root's Gloo span names what it sends, the others' nothing), whose bytes are
  the root's send buffer per call, as nccl-tests counts a scatter.
Exit 0 when every check passes, 1 otherwise; every check is printed.

    python_groups_test.py --tracerun BIN --work DIR [--python PY]

tests/gpu registers it with the GPU machine's interpreter (torch 2.x: c10d::barrier is handed a
dummy tensor there, and ProcessGroup is a front for its backend).
"""
import argparse
import json
import os
import shutil
import sqlite3
import subprocess
import sys

from e2e_checks import Checks

HERE = os.path.dirname(os.path.abspath(__file__))
PROGRAM = os.path.join(HERE, "python_groups_prog.py")
PYTHON = "/usr/bin/python3"  # Debian's, with torch (docs/capture.md); --python replaces it
RANKS = 4


def run(a, layout):
    db = os.path.join(a.work, layout + ".db")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    cmd = [a.tracerun, "--nproc-per-node", str(RANKS), "--status", "off", "-o", db, "--",
           a.python, PROGRAM, layout]
    # A run takes about 5 s here: 75 s each keeps the three layouts inside ctest's 240 s
    # (tests/gpu), and a hung run fails with what it printed.
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=75)
    except subprocess.TimeoutExpired as e:
        def text(b):
            return b.decode(errors="replace") if isinstance(b, bytes) else (b or "")
        out = subprocess.CompletedProcess(cmd, -9, text(e.stdout), text(e.stderr) + "\ntimed out")
    with open(os.path.join(a.work, layout + ".log"), "w") as log:
        log.write(out.stdout + out.stderr)
    truth = {}
    for line in out.stdout.splitlines():
        if "truth " not in line:
            continue
        fields = dict(f.split("=") for f in line.split("truth ", 1)[1].split())
        truth[int(fields["rank"])] = {
            "group_rank": int(fields["group_rank"]), "group_size": int(fields["group_size"]),
            "members": [int(m) for m in fields["members"].split(",")],
            "gathered": [int(m) for m in fields["gathered"].split(",")],
            "world": int(fields["world"]), "name": fields["name"],
            "world_name": fields["world_name"]}
    return out.returncode, db, truth


def check_layout(c, a, layout):
    rc, db, truth = run(a, layout)
    c.check(rc == 0 and len(truth) == RANKS, "[%s] traced run exits 0, every rank says its group"
            % layout, "see %s.log" % layout)
    if rc != 0 or len(truth) != RANKS:
        return
    for r, t in truth.items():
        c.check(t["gathered"] == t["members"], "[%s] rank %d: the all-gather is the group's" %
                (layout, r), "gathered %s, members %s" % (t["gathered"], t["members"]))

    con = sqlite3.connect(db)
    arg = ("(SELECT a.value FROM args a JOIN strings k ON k.id = a.key "
           " WHERE a.span = sn.id AND k.value = '%s')")
    rows = con.execute(
        "SELECT sn.id, sn.rank, sn.name, %s, %s, %s FROM span_names sn "
        "WHERE sn.name LIKE 'gloo:%%' OR sn.name LIKE 'c10d::%%'"
        % (arg % "group_size", arg % "group_rank", arg % "group_id")).fetchall()
    kinds = {"gloo:": 0, "c10d::": 0}
    wrong = []
    for span, rank, name, size, place, group_id in rows:
        kinds["gloo:" if name.startswith("gloo:") else "c10d::"] += 1
        t = truth[rank]
        # torch's counter names ("0" the world, "1", "2"... in creation order) are their ids.
        want = ((t["world"], rank, int(t["world_name"])) if "barrier" in name
                else (t["group_size"], t["group_rank"], int(t["name"])))
        if (size, place, group_id) != want:
            wrong.append("%s on rank %d: %s, want %s" % (name, rank, (size, place, group_id),
                                                          want))
    c.check(kinds["gloo:"] > 0 and kinds["c10d::"] > 0, "[%s] the trace has Gloo's spans and the "
            "dispatcher's c10d ops" % layout, str(kinds))
    c.check(not wrong, "[%s] every gloo:* and c10d::* span has its rank's group size, place and "
            "name" % layout, "; ".join(wrong[:5]) + (" ..." if len(wrong) > 5 else ""))

    report = json.loads(subprocess.run([a.tracerun, "report", db, "--json"], capture_output=True,
                                       text=True, check=True).stdout)
    groups = sorted({tuple(t["members"]) for t in truth.values()})
    seen = {}
    for row in report["comm"]["collectives"]:
        want = [list(range(RANKS))] if row["op"] == "barrier" else [list(g) for g in groups]
        ok = row["ranks"] in want and row["group_size"] == len(row["ranks"])
        seen.setdefault(row["op"], set()).add(tuple(row["ranks"]))
        c.check(ok, "[%s] report row %s %s (%s) is one of the program's groups" %
                (layout, row["op"], row["ranks"], row["group_source"]),
                "group_size %s, groups %s" % (row["group_size"], want))
    for op in ("all_reduce", "all_gather", "scatter", "gather"):
        c.check(seen.get(op) == set(groups), "[%s] %s has a row for each group" % (layout, op),
                "rows %s, groups %s" % (sorted(seen.get(op, [])), groups))
    for row in report["comm"]["collectives"]:
        if row["op"] in ("scatter", "gather"):  # 4 calls of f32[256] pieces, 2 ranks
            c.check(row["calls"] == 4 and row["bytes"] == 4 * 2 * 256 * 4, "[%s] %s %s: 4 calls, "
                    "two 1 KiB pieces each (nccl-tests' size: the root's buffer)" %
                    (layout, row["op"], row["ranks"]),
                    "calls %s, bytes %s" % (row["calls"], row["bytes"]))


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--tracerun", required=True)
    p.add_argument("--work", required=True)
    p.add_argument("--python", default=PYTHON)
    a = p.parse_args()
    shutil.rmtree(a.work, ignore_errors=True)
    os.makedirs(a.work)
    c = Checks()
    for layout in ("contiguous", "strided", "interleaved"):
        check_layout(c, a, layout)
    sys.exit(1 if c.failed else 0)


if __name__ == "__main__":
    main()
