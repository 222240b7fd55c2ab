// End-to-end: `tracerun -- PROGRAM` on programs nobody here instrumented (the plain libtorch
// sample, the PyTorch script, shells and wrappers), read back with TraceReader; the Python run
// compared with libtorch's own profiler in the same process. No libtorch in this test binary.
//
// Sections: running processes · reading traces · C++ sample · Python · wrappers and targets ·
//           exits and signals
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <catch2/catch.hpp>

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "../support/child_process.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

// ---- running processes --------------------------------------------------------------------------

namespace {

using Result = testing::ProcessResult;
using testing::readFile;

bool exists(const std::string& path) {
  return testing::fileExists(path);
}

// A scratch directory per test process.
const std::string& scratch() {
  static const std::string dir = [] {
    // One intra-op thread, one BLAS thread: quick and deterministic on a small machine.
    ::setenv("OMP_NUM_THREADS", "1", 1);
    ::setenv("OPENBLAS_NUM_THREADS", "1", 1);
    return testing::processScratchDir("tracerun_launcher");
  }();
  return dir;
}

// A child whose output goes to this test process's scratch directory.
struct Child : testing::Child {
  explicit Child(const std::vector<std::string>& argv) : testing::Child(argv, scratch()) {}
};

Result run(const std::vector<std::string>& argv) {
  return Child(argv).wait();
}

std::vector<std::string> tracerunArgs(const std::string& output, std::vector<std::string> rest) {
  std::vector<std::string> argv = {TRACERUN_BIN, "-o", output};
  argv.insert(argv.end(), rest.begin(), rest.end());
  return argv;
}

// ---- reading traces -----------------------------------------------------------------------------

struct Span {
  trace::SpanRow row;
  std::string name;
};

std::vector<Span> spansOf(const trace::TraceReader& r) {
  std::vector<Span> out;
  for (const auto& t : r.tracks()) {
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) { out.push_back({s, r.str(s.name)}); });
  }
  return out;
}

int countNamed(const std::vector<Span>& spans, const std::string& name, core::Category c) {
  int n = 0;
  for (const auto& s : spans) n += s.name == name && s.row.category == c;
  return n;
}

int64_t stat(const trace::TraceReader& r, const std::string& name) {
  for (const auto& s : r.stats()) {
    if (s.name == name) return s.value;
  }
  return -1;
}

}  // namespace

// ---- C++ sample ---------------------------------------------------------------------------------

TEST_CASE("tracerun runs the plain libtorch sample and records ops backward links memory stats") {
  const std::string db = scratch() + "/cpp.db";
  const Result r = run(tracerunArgs(db, {"--", SAMPLE_BIN, "3"}));
  INFO(r.describe());
  REQUIRE(r.exited);
  REQUIRE(r.code == 0);
  CHECK(r.out.find("step 2 loss") != std::string::npos);
  CHECK(r.err.find("trace written to " + db) != std::string::npos);
  CHECK_FALSE(exists(db + ".shards"));

  const auto reader = trace::TraceReader::open(db);
  const auto spans = spansOf(reader);
  CHECK(countNamed(spans, "aten::addmm", core::Category::kOp) == 6);
  CHECK(countNamed(spans, "AddmmBackward0", core::Category::kBackward) == 6);
  int backwardWithSeq = 0;
  for (const auto& s : spans)
    backwardWithSeq += s.row.category == core::Category::kBackward && s.row.seq >= 0;
  const auto counts = reader.counts();
  CHECK(counts.flows == backwardWithSeq);
  CHECK(counts.memory > 100);
  CHECK(stat(reader, "dropped_events") == 0);
  CHECK(stat(reader, "capture_unmatched_ends") == 0);
  CHECK(stat(reader, "memory_peak_bytes") > 0);
  int withShapes = 0;
  for (const auto& s : spans) withShapes += s.row.detail != 0;
  CHECK(withShapes > 300);

  // The trace commands read it.
  const Result info = run({TRACERUN_BIN, "info", db});
  INFO(info.describe());
  CHECK(info.code == 0);
  const std::string json = scratch() + "/cpp.json";
  const Result exported = run({TRACERUN_BIN, "export", db, "--chrome", json});
  INFO(exported.describe());
  CHECK(exported.code == 0);
  CHECK(nlohmann::json::parse(readFile(json)).size() > 0);
}

TEST_CASE("no-shapes and capture lists reach the library") {
  const std::string db = scratch() + "/noshapes.db";
  const Result r =
      run(tracerunArgs(db, {"--no-shapes", "--capture", "ops", "--", SAMPLE_BIN, "1"}));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  const auto reader = trace::TraceReader::open(db);
  for (const auto& s : spansOf(reader)) CHECK(s.row.detail == 0);
  CHECK(reader.counts().memory == 0);

  // The opt-in word `tensors` reaches the library: ops carry input/output identities (in0, out0).
  auto identityArgs = [](const trace::TraceReader& reader) {
    int n = 0;
    for (const auto& t : reader.tracks()) {
      for (const auto& a : reader.argsOfTrack(t.id)) {
        const std::string key = reader.str(a.key);
        n += key == "in0" || key == "out0";
      }
    }
    return n;
  };
  CHECK(identityArgs(reader) == 0);
  const std::string tensorsDb = scratch() + "/tensors.db";
  const Result tensors =
      run(tracerunArgs(tensorsDb, {"--capture", "ops,tensors", "--", SAMPLE_BIN, "1"}));
  INFO(tensors.describe());
  REQUIRE(tensors.code == 0);
  CHECK(identityArgs(trace::TraceReader::open(tensorsDb)) > 0);

  const Result bad = run(tracerunArgs(db, {"--capture", "ops,bogus", "--", SAMPLE_BIN, "1"}));
  CHECK(bad.code == 2);
  CHECK(bad.err.find("bogus") != std::string::npos);
  CHECK(bad.err.find("tensors") != std::string::npos);  // the message lists the valid words
  const Result missing = run(tracerunArgs(db, {"--", scratch() + "/no_such_program"}));
  CHECK(missing.code == 127);
}

// ---- Python -------------------------------------------------------------------------------------

#ifdef TRACERUN_TEST_PYTHON
TEST_CASE("tracerun runs an ordinary PyTorch script through Debian's python3") {
  const std::string db = scratch() + "/py.db";
  const Result r =
      run(tracerunArgs(db, {"--", TRACERUN_TEST_PYTHON, PYTHON_SAMPLE, "--steps", "2"}));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  CHECK(r.out.find("step 1 loss") != std::string::npos);
  const auto reader = trace::TraceReader::open(db);
  const auto spans = spansOf(reader);
  CHECK(countNamed(spans, "train_step", core::Category::kUser) == 2);
  CHECK(countNamed(spans, "aten::addmm", core::Category::kOp) == 4);
  CHECK(countNamed(spans, "AddmmBackward0", core::Category::kBackward) == 4);
  CHECK(reader.counts().flows > 0);
  CHECK(reader.counts().memory > 0);
  CHECK(stat(reader, "dropped_events") == 0);
}

TEST_CASE(
    "ops and backward links under tracerun equal libtorch's profiler in the same Python run") {
  const std::string db = scratch() + "/pycheck.db";
  const std::string json = scratch() + "/pycheck.json";
  const Result r = run(tracerunArgs(db, {"--", TRACERUN_TEST_PYTHON, PYTHON_CHECK, json}));
  INFO(r.describe());
  REQUIRE(r.code == 0);
  const auto events = nlohmann::json::parse(readFile(json));
  REQUIRE(events.size() > 100);

  auto kindOfScope = [](int scope) {
    return scope == 0 ? "op" : scope == 1 ? "backward" : scope == 7 ? "user" : "other";
  };
  auto kindOf = [](core::Category c) {
    switch (c) {
      case core::Category::kOp:
        return "op";
      case core::Category::kBackward:
        return "backward";
      case core::Category::kUser:
      case core::Category::kPhase:
      case core::Category::kModule:
        return "user";
      default:
        return "other";
    }
  };
  std::map<std::pair<std::string, std::string>, int> theirs, ours;
  std::set<std::pair<std::string, int64_t>> theirBackward, ourBackward;
  std::map<int64_t, std::set<std::string>> theirForwardBySeq;
  for (const auto& e : events) {
    const std::string name = e["name"];
    const int64_t seq = e["seq"];
    const std::string kind = kindOfScope(e["scope"]);
    ++theirs[{kind, name}];
    if (kind == std::string("backward") && seq >= 0) theirBackward.insert({name, seq});
    if (kind == std::string("op") && seq >= 0) theirForwardBySeq[seq].insert(name);
  }

  const auto reader = trace::TraceReader::open(db);
  const auto spans = spansOf(reader);
  const Span* window = nullptr;
  for (const auto& s : spans) {
    if (s.name == "test_window") window = &s;
  }
  REQUIRE(window != nullptr);
  for (const auto& s : spans) {
    if (s.row.track == window->row.track && s.row.depth > window->row.depth &&
        s.row.start_ns >= window->row.start_ns && s.row.end_ns() <= window->row.end_ns()) {
      ++ours[{kindOf(s.row.category), s.name}];
    }
  }
  std::string diff;
  for (const auto& [k, v] : theirs) {
    const int o = ours.count(k) ? ours.at(k) : 0;
    if (o != v)
      diff += k.first + " " + k.second + ": profiler " + std::to_string(v) + ", tracerun " +
              std::to_string(o) + "\n";
  }
  INFO(diff);
  CHECK(ours == theirs);

  auto at = [&](int64_t track, int64_t ts) -> const Span* {
    for (const auto& s : spans) {
      if (s.row.track == track && s.row.start_ns == ts) return &s;
    }
    return nullptr;
  };
  for (const auto& f : reader.flows()) {
    const Span* src = at(f.src_track, f.src_ts_ns);
    const Span* dst = at(f.dst_track, f.dst_ts_ns);
    REQUIRE(src != nullptr);
    REQUIRE(dst != nullptr);
    CHECK(src->row.seq == dst->row.seq);
    CHECK(theirForwardBySeq[src->row.seq].count(src->name) == 1);
    ourBackward.insert({dst->name, dst->row.seq});
  }
  CHECK(ourBackward == theirBackward);
}

TEST_CASE("a process that calls _exit keeps what was streamed before its last second") {
  const std::string db = scratch() + "/exit.db";
  const std::string script =
      "import os, time, torch\n"
      "m = torch.nn.Linear(8, 4)\n"
      "m(torch.randn(2, 8)).sum().backward()\n"
      "time.sleep(2.5)\n"
      "os._exit(5)\n";
  const Result r = run(tracerunArgs(db, {"--", TRACERUN_TEST_PYTHON, "-c", script}));
  INFO(r.describe());
  REQUIRE(r.code == 5);
  const auto reader = trace::TraceReader::open(db);
  const auto spans = spansOf(reader);
  CHECK(countNamed(spans, "aten::linear", core::Category::kOp) == 1);
  CHECK(countNamed(spans, "AddmmBackward0", core::Category::kBackward) == 1);
}
#endif

// ---- wrappers and targets -----------------------------------------------------------------------

TEST_CASE("wrappers do not capture and the target option names the real program") {
  const std::string sample = SAMPLE_BIN;
  {
    // The shell is the target: it records nothing itself, and the sample it starts is not it.
    const std::string db = scratch() + "/sh.db";
    const Result r = run(tracerunArgs(db, {"--", "/bin/sh", "-c", sample + " 1"}));
    INFO(r.describe());
    REQUIRE(r.code == 0);
    CHECK(r.out.find("step 0 loss") != std::string::npos);
    if (exists(db)) CHECK(trace::TraceReader::open(db).counts().spans == 0);
  }
  {
    const std::string db = scratch() + "/timeout.db";
    const Result r =
        run(tracerunArgs(db, {"--target", "plain_libtorch_mlp", "--", "/usr/bin/timeout", "120",
                              "/bin/sh", "-c", sample + " 2"}));
    INFO(r.describe());
    REQUIRE(r.code == 0);
    const auto reader = trace::TraceReader::open(db);
    CHECK(reader.ranks().size() == 1);
    CHECK(countNamed(spansOf(reader), "aten::addmm", core::Category::kOp) == 4);
  }
}

// ---- exits and signals --------------------------------------------------------------------------

TEST_CASE("SIGTERM flushes and closes the shard and tracerun reports the signal") {
  const std::string db = scratch() + "/term.db";
  Child child(tracerunArgs(db, {"--", SAMPLE_BIN, "100000000"}));
  // Wait (not a timing assertion) until the program is well into training.
  for (int i = 0; i < 1200 && child.out().find("step 400 ") == std::string::npos; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  REQUIRE(child.out().find("step 400 ") != std::string::npos);
  ::kill(child.pid(), SIGTERM);  // tracerun forwards it to the program
  const Result r = child.wait();
  INFO(r.describe());
  REQUIRE(r.exited);
  CHECK(r.code == 128 + SIGTERM);
  CHECK(r.err.find("killed by signal") != std::string::npos);
  const auto reader = trace::TraceReader::open(db);
  // Stats are written only when the capture stops: the signal path ran the flush.
  CHECK(stat(reader, "capture_unmatched_ends") >= 0);
  CHECK(stat(reader, "memory_peak_bytes") > 0);
  CHECK(countNamed(spansOf(reader), "aten::addmm", core::Category::kOp) >= 40);
}

TEST_CASE(
    "Ctrl-C in a Python program is its KeyboardInterrupt, as without tracerun, and the trace "
    "is whole") {
  // CPython raises KeyboardInterrupt only where SIGINT had the default action when it started;
  // libtracerun loads first, so it leaves SIGINT to Python and closes the shard at Python's exit
  // (Py_AtExit), which an uncaught KeyboardInterrupt reaches before Python ends by SIGINT.
  // The program sends itself SIGINT (as the terminal's Ctrl-C would): caught once, then uncaught.
  const std::string program =
      "import signal, os, time, torch\n"
      "print('handler', signal.getsignal(signal.SIGINT), flush=True)\n"
      "torch.ones(3) + 1\n"
      "try:\n"
      "    os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
      "except KeyboardInterrupt:\n"
      "    print('caught', flush=True)\n"
      "try:\n"
      "    os.kill(os.getpid(), signal.SIGINT); time.sleep(5)\n"
      "finally:\n"
      "    print('finally ran', flush=True)\n";
  const Result plain = run({TRACERUN_TEST_PYTHON, "-c", program});
  INFO("without tracerun: " << plain.describe());
  REQUIRE(plain.out.find("caught\nfinally ran\n") != std::string::npos);
  const std::string db = scratch() + "/keyboard_interrupt.db";
  const Result r = run(tracerunArgs(db, {"--", TRACERUN_TEST_PYTHON, "-c", program}));
  INFO("under tracerun: " << r.describe());
  CHECK(r.out == plain.out);  // the same handler, the same two interrupts
  CHECK(r.err.find("KeyboardInterrupt") != std::string::npos);
  CHECK(r.code == 128 + SIGINT);  // Python ended by SIGINT after the uncaught one
  CHECK(r.err.find("killed by signal 2") != std::string::npos);
  const auto reader = trace::TraceReader::open(db);
  CHECK(reader.meta("complete") == "1");
  CHECK(stat(reader, "merge_incomplete_shard") <= 0);
  CHECK(countNamed(spansOf(reader), "aten::add", core::Category::kOp) >= 1);
  const Result report = run({TRACERUN_BIN, "report", db});
  INFO(report.describe());
  CHECK(report.code == 0);  // 3 when a shard was left unfinished
}

TEST_CASE("tracerun passes the program's exit code through") {
  const std::string db = scratch() + "/code.db";
  const Result r = run(tracerunArgs(db, {"--", "/bin/sh", "-c", "exit 7"}));
  INFO(r.describe());
  CHECK(r.code == 7);
}
