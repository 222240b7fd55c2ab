"""Shared helpers of the GPU tests (tests/gpu/) and bench/gpu_overhead.py.

Every GPU test is one Python script run by ctest (label `gpu`) with the interpreter of the CMake cache
variable TRACERUN_PYTHON, or $TRACERUN_PYTHON at test time (the script re-executes itself with it).
Without torch or without a CUDA device a test prints one line, "no CUDA GPU: skipped (...)", and
exits with SKIP (77, the tests' SKIP_RETURN_CODE).

Common flags: --tracerun BIN (the launcher), --work DIR (where runs, traces and result.json go),
--source-dir DIR (the checkout; nanoGPT is looked up under it), and test-specific ones.
"""
import argparse
import json
import os
import re
import shutil
import sqlite3
import subprocess
import sys
import time

SKIP = 77
HERE = os.path.dirname(os.path.abspath(__file__))

# The capture words tracerun records by default (docs/capture.md).
DEFAULT_WORDS = "ops,scopes,memory,comm"

# categories (docs/trace-format.md): 0 op, 1 backward, 2 user, 3 module, 4 comm, 5 phase, 6 kernel,
# 7 memcpy, 8 other; flow_kinds: 2 op_kernel.
CAT_OP, CAT_BACKWARD, CAT_USER, CAT_COMM, CAT_PHASE, CAT_KERNEL, CAT_MEMCPY = 0, 1, 2, 4, 5, 6, 7
FLOW_OP_KERNEL = 2


def reexec_with_configured_python():
    """$TRACERUN_PYTHON at test time wins over the interpreter CMake configured."""
    want = os.environ.get("TRACERUN_PYTHON")
    if not want or os.environ.get("TRACERUN_GPU_REEXEC") == "1":
        return
    want_path = shutil.which(want) or want
    if os.path.realpath(want_path) == os.path.realpath(sys.executable):
        return
    os.environ["TRACERUN_GPU_REEXEC"] = "1"
    os.execv(want_path, [want_path] + sys.argv)


def require_cuda():
    """Imports torch, or prints the skip line and exits SKIP. Returns the torch module."""
    reexec_with_configured_python()
    try:
        import torch  # noqa: F401
    except Exception as e:  # pragma: no cover - depends on the machine
        print(f"no CUDA GPU: skipped ({sys.executable} cannot import torch: {type(e).__name__})")
        sys.exit(SKIP)
    if getattr(torch.version, "cuda", None) is None:
        print(f"no CUDA GPU: skipped (torch {torch.__version__} at {sys.executable} is built without CUDA)")
        sys.exit(SKIP)
    if not torch.cuda.is_available():
        print("no CUDA GPU: skipped (torch.cuda.is_available() is false)")
        sys.exit(SKIP)
    return torch


# A test's own time under ctest (tests/gpu/CMakeLists.txt: TIMEOUT 240) less a margin for its
# result.json: run() cuts a command at what is left of it, so a hung run costs that test's later
# checks, not its whole result. Started when a test parses its arguments (base_parser); the
# benches, which keep budgets of their own, never start it.
TEST_TIME_S = 225
_test_deadline = [None]  # monotonic seconds


def base_parser(description):
    _test_deadline[0] = time.monotonic() + TEST_TIME_S
    p = argparse.ArgumentParser(description=description)
    p.add_argument("--tracerun", help="the tracerun launcher binary")
    p.add_argument("--work", help="folder for runs, traces and result.json (emptied first)")
    p.add_argument("--source-dir", default=os.path.dirname(os.path.dirname(HERE)))
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    return p


def prepare_work(work):
    if os.path.isdir(work):
        shutil.rmtree(work)
    os.makedirs(work)
    return work


def nanogpt_dir(source_dir):
    d = os.environ.get("NANOGPT_DIR") or os.path.join(source_dir, ".gpu-deps", "nanoGPT")
    if not os.path.isfile(os.path.join(d, "model.py")):
        fail_line(f"nanoGPT's model.py not found in {d} (set NANOGPT_DIR, or let scripts/gpu-check.sh put it there)")
    return d


def fail_line(msg):
    print(f"FAIL: {msg}")
    sys.exit(1)


class Checks:
    """Collects named checks; prints each, writes result.json, exits 0 only when all passed."""

    def __init__(self, name, work):
        self.name, self.work, self.items, self.info = name, work, [], {}

    def check(self, ok, what, detail=""):
        ok = bool(ok)
        self.items.append({"ok": ok, "check": what, "detail": detail})
        print(f"{'ok  ' if ok else 'FAIL'} {what}{(': ' + detail) if detail else ''}", flush=True)
        return ok

    def finish(self):
        failed = [c for c in self.items if not c["ok"]]
        result = {"test": self.name, "passed": not failed and bool(self.items),
                  "checks": self.items, "info": self.info}
        if self.work:
            with open(os.path.join(self.work, "result.json"), "w") as f:
                json.dump(result, f, indent=1)
        print(f"{self.name}: {'passed' if result['passed'] else 'FAILED'} "
              f"({len(self.items) - len(failed)}/{len(self.items)} checks)")
        sys.exit(0 if result["passed"] else 1)


# gpttrain's model for the GPU runs (fp32, dropout 0, deterministic cuBLAS with
# CUBLAS_WORKSPACE_CONFIG): test_gpttrain_losses.py and test_gpttrain_offload_cpu.py.
GPTTRAIN_MODEL = ["--device", "cuda", "--backend", "nccl", "--layers", "4", "--hidden", "256",
                  "--heads", "8", "--seq-len", "128", "--vocab", "512", "--global-batch", "8",
                  "--micro-batch-size", "4", "--dropout", "0", "--seed", "7"]


def gpttrain_setup(description, name):
    """The start of a gpttrain GPU test: its arguments (those of base_parser, --gpttrain, --steps),
    CUDA and the built gpttrain required, an emptied work folder, its Checks and the environment
    of deterministic cuBLAS. Returns (args, work, checks, env)."""
    p = base_parser(description)
    p.add_argument("--gpttrain", required=False)
    p.add_argument("--steps", type=int, default=6)
    a = p.parse_args()
    require_cuda()
    if not a.gpttrain or not os.path.exists(a.gpttrain):
        fail_line(f"gpttrain not built ({a.gpttrain}): the GPU build must build the trainer")
    work = prepare_work(a.work)
    env = dict(os.environ, CUBLAS_WORKSPACE_CONFIG=":4096:8")
    return a, work, Checks(name, work), env


def gpttrain_losses(path):
    """{step: loss} from a gpttrain --log-json file ({} when it is missing)."""
    out = {}
    if os.path.exists(path):
        with open(path) as f:
            for line in f:
                if line.strip():
                    j = json.loads(line)
                    if "loss" in j:
                        out[j["step"]] = float(j["loss"])
    return out


def run(cmd, log_path, env=None, timeout=300):
    """Runs cmd, stdout+stderr to log_path; returns (exit code, log text, seconds). In a test,
    cut at what is left of the test's time (TEST_TIME_S)."""
    t0 = time.monotonic()
    if _test_deadline[0] is not None:
        timeout = max(5, min(timeout, int(_test_deadline[0] - t0)))
    with open(log_path, "w") as log:
        log.write("$ " + " ".join(cmd) + "\n")
        log.flush()
        try:
            rc = subprocess.run(cmd, stdout=log, stderr=subprocess.STDOUT, env=env,
                                timeout=timeout).returncode
        except subprocess.TimeoutExpired:
            rc = 124
            log.write(f"\n[timed out after {timeout} s]\n")
    with open(log_path, errors="replace") as f:
        text = f.read()
    return rc, text, time.monotonic() - t0


def traced(tracerun, db, capture, prog, extra=()):
    """The tracerun command line for prog (a list). capture None: the default words."""
    cmd = [tracerun, "-o", db]
    if capture is not None:
        cmd += ["--capture", capture]
    return cmd + list(extra) + ["--"] + list(prog)


def bad_exit_text(text):
    """What in a launcher's output says the program or the trace went wrong."""
    for needle in ("terminate called", "killed by signal", "Aborted", "Segmentation fault",
                   "incomplete"):
        if needle in text:
            return needle
    return None


class Trace:
    """Read-only queries on a tracerun trace (docs/trace-format.md)."""

    def __init__(self, path):
        self.path = path
        self.db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)

    def q(self, sql, *args):
        return self.db.execute(sql, args).fetchall()

    def meta(self):
        return dict(self.q("SELECT key, value FROM meta"))

    def stats(self):
        return {(r, n): (v, s) for r, n, v, s in self.q("SELECT rank, name, value, severity FROM stats")}

    def stat(self, name, rank=0):
        row = self.q("SELECT value FROM stats WHERE rank = ? AND name = ?", rank, name)
        return row[0][0] if row else None

    def errors(self):
        """Stats with severity 2 (data lost) and any stat naming an incomplete shard."""
        return [f"rank {r} {n}={v}" for (r, n), (v, s) in self.stats().items()
                if (s >= 2 and v != 0) or ("incomplete" in n and v != 0)]

    def span_count(self, category=None, rank=None):
        sql = "SELECT count(*) FROM spans s JOIN tracks t ON t.id = s.track WHERE 1"
        args = []
        if category is not None:
            sql += " AND s.category = ?"
            args.append(category)
        if rank is not None:
            sql += " AND t.rank = ?"
            args.append(rank)
        return self.q(sql, *args)[0][0]

    def named_spans(self, name, category=None):
        """(rank, start_ns, end_ns) of spans with that name."""
        sql = ("SELECT t.rank, s.start_ns, s.start_ns + s.dur_ns FROM spans s "
               "JOIN strings st ON st.id = s.name JOIN tracks t ON t.id = s.track WHERE st.value = ?")
        args = [name]
        if category is not None:
            sql += " AND s.category = ?"
            args.append(category)
        return self.q(sql + " ORDER BY s.start_ns", *args)

    def kernel_counts(self):
        """{kernel name: count} over the whole trace, every rank and stream."""
        return dict(self.q("SELECT st.value, count(*) FROM spans s JOIN strings st ON st.id = "
                           "s.name WHERE s.category = ? GROUP BY st.value", CAT_KERNEL))

    def name_counts_in_window(self, t0, t1, categories, rank=0):
        """{name: count} of spans of those categories starting in [t0, t1] on host tracks."""
        marks = ",".join("?" * len(categories))
        rows = self.q(
            f"SELECT st.value, count(*) FROM spans s JOIN strings st ON st.id = s.name "
            f"JOIN tracks t ON t.id = s.track WHERE t.rank = ? AND s.category IN ({marks}) "
            f"AND s.start_ns BETWEEN ? AND ? GROUP BY st.value", rank, *categories, t0, t1)
        return dict(rows)

    def device_census(self, t0, t1, rank=0):
        """{name: count} of the kernels (and copies/memsets as "memcpy XtoY"/"memset") that ops
        starting inside [t0, t1] launched: device spans at the end of an op_kernel flow whose source
        (the op on the host thread that launched it) starts in the window. Also returns the number
        of device spans of the rank with no incoming op_kernel flow (launched outside any op)."""
        rows = self.q(
            "SELECT st.value, s.category, count(DISTINCT s.id) FROM flows f "
            "JOIN tracks ht ON ht.id = f.src_track "
            "JOIN spans s ON s.track = f.dst_track AND s.start_ns = f.dst_ts_ns "
            "JOIN strings st ON st.id = s.name "
            "WHERE f.kind = ? AND ht.rank = ? AND f.src_ts_ns BETWEEN ? AND ? "
            "AND s.category IN (?, ?) GROUP BY st.value, s.category",
            FLOW_OP_KERNEL, rank, t0, t1, CAT_KERNEL, CAT_MEMCPY)
        census = {}
        for name, cat, n in rows:
            key = name if cat == CAT_KERNEL else normalize_copy_name(name)
            census[key] = census.get(key, 0) + n
        unflowed = self.q(
            "SELECT count(*) FROM spans s JOIN tracks t ON t.id = s.track WHERE t.rank = ? "
            "AND s.category IN (?, ?) AND NOT EXISTS (SELECT 1 FROM flows f WHERE f.kind = ? "
            "AND f.dst_track = s.track AND f.dst_ts_ns = s.start_ns)",
            rank, CAT_KERNEL, CAT_MEMCPY, FLOW_OP_KERNEL)[0][0]
        return census, unflowed

    def counter_max(self, track_name):
        row = self.q("SELECT max(c.value) FROM counters c JOIN tracks t ON t.id = c.track "
                     "WHERE t.name = ?", track_name)
        return row[0][0] if row else None

    def track_names(self):
        return [r[0] for r in self.q("SELECT name FROM tracks")]


def normalize_copy_name(name):
    """Kineto's "Memcpy HtoD (Pageable -> Device)" / "Memset (Device)" and tracerun's
    "memcpy HtoD" / "memset" to one key: "[memcpy HtoD]", "[memset]"."""
    m = re.match(r"(?i)memcpy\s+(\w+)", name)
    if m:
        return f"[memcpy {m.group(1)}]"
    if name.lower().startswith("memset"):
        return "[memset]"
    return f"[{name}]"


def kineto_census(chrome_json, scope):
    """torch.profiler's side: {name: count} of the kernels, copies and memsets whose launching
    runtime/driver call (same `correlation`) starts inside the host span of the record_function
    scope `scope` (cat user_annotation). Returns (census, window_us, unlinked device events)."""
    with open(chrome_json) as f:
        trace = json.load(f)
    events = trace["traceEvents"] if isinstance(trace, dict) else trace
    windows = [(float(e["ts"]), float(e["ts"]) + float(e.get("dur", 0))) for e in events
               if e.get("ph") == "X" and e.get("cat") == "user_annotation" and e.get("name") == scope]
    if len(windows) != 1:
        raise RuntimeError(f"{chrome_json}: expected one user_annotation {scope!r}, found {len(windows)}")
    t0, t1 = windows[0]
    launch_ts, op_ts = {}, {}
    for e in events:
        if e.get("ph") == "X" and e.get("cat") in ("cuda_runtime", "cuda_driver"):
            corr = (e.get("args") or {}).get("correlation")
            if corr is not None:
                launch_ts[corr] = float(e["ts"])
        elif e.get("ph") == "X" and e.get("cat") == "cpu_op":
            ext = (e.get("args") or {}).get("External id")
            if ext is not None:
                op_ts.setdefault(ext, float(e["ts"]))
    census, unlinked = {}, 0
    for e in events:
        cat = e.get("cat")
        if e.get("ph") != "X" or cat not in ("kernel", "gpu_memcpy", "gpu_memset"):
            continue
        corr = (e.get("args") or {}).get("correlation")
        ts = launch_ts.get(corr)
        if ts is None:  # a launch record Kineto dropped: the launching op's start instead
            ts = op_ts.get((e.get("args") or {}).get("External id"))
        if ts is None:
            unlinked += 1
            continue
        if t0 <= ts <= t1:
            key = e["name"] if cat == "kernel" else normalize_copy_name(e["name"])
            census[key] = census.get(key, 0) + 1
    return census, (t0, t1), unlinked


def census_diff(expected, got, limit=8):
    """Lines naming the first differences (expected = torch.profiler, got = tracerun)."""
    lines = []
    for name in sorted(set(expected) | set(got), key=lambda n: (-max(expected.get(n, 0), got.get(n, 0)), n)):
        a, b = expected.get(name, 0), got.get(name, 0)
        if a != b:
            lines.append(f"torch.profiler {a} vs tracerun {b}: {name[:160]}")
    return lines[:limit], len(lines)


def tracerun_info_problems(tracerun, db, log_path):
    rc, text, _ = run([tracerun, "info", db], log_path, timeout=120)
    problems = []
    if rc != 0:
        problems.append(f"tracerun info exit {rc}")
    for needle in ("incomplete", "not described", "merge_incomplete", "corrupt"):
        if needle in text:
            problems.append(f"info says {needle!r}")
    return problems
