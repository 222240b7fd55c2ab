// The NCCL interposer (libtracerun_nccl.so) preloaded into nccl_caller, which links a stand-in
// libnccl: the stand-in still receives every call with the same arguments (its own log), and the
// trace holds one span per call with bytes = count x dtype size, peer, root and the communicator.
#include <nccl.h>  // NCCL_VERSION_CODE: which calls the stand-in has
#include <catch2/catch.hpp>

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "../support/process_scratch.h"
#include "tracerun/trace/analysis/comm.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

namespace {

std::string tempPath(const std::string& stem) {
  return testing::processScratchPath("nccl_" + stem);
}

std::vector<std::string> lines(const std::string& path) {
  std::vector<std::string> out;
  std::ifstream in(path);
  for (std::string l; std::getline(in, l);) out.push_back(l);
  return out;
}

// What nccl_caller issues, as the stand-in logs it (ncclFloat32=7, Int64=4, Float16=6,
// Float64=8, Int32=2, Uint8=1, Bfloat16=9; ncclSum=0, Prod=1, Max=2).
const std::vector<std::string> kIssued{
    "GetUniqueId",
    "CommInitRank nranks=4 id=fake-nccl-id rank=2",
    "GroupStart",
    "AllReduce send=0x1000 recv=0x2000 count=1000 dtype=7 op=0 stream=0x77",
    "Broadcast send=0x1000 recv=0x1000 count=10 dtype=4 root=1 stream=0x77",
    "AllGather send=0x1000 recv=0x3000 count=256 dtype=6 stream=0x77",
    "ReduceScatter send=0x3000 recv=0x1000 count=64 dtype=8 op=2 stream=0x77",
    "Reduce send=0x1000 recv=0x2000 count=7 dtype=2 op=1 root=3 stream=0x77",
    "Send send=0x1000 count=100 dtype=1 peer=3 stream=0x77",
    "Recv recv=0x2000 count=50 dtype=9 peer=1 stream=0x77",
    "GroupEnd",
    "CommDestroy comm=2",
};

struct Expected {
  std::string op;
  int64_t bytes, dtype, peer, root;
};

// nccl_caller abort: a communicator aborted instead of destroyed.
const std::vector<std::string> kIssuedAbort{
    "GetUniqueId",
    "CommInitRank nranks=2 id=fake-nccl-id rank=1",
    "AllReduce send=0x1000 recv=0x2000 count=16 dtype=7 op=0 stream=0x77",
    "CommAbort comm=1",
};

int run(const std::string& env, const std::string& args = "") {
  const std::string cmd = env + " " + NCCL_CALLER + (args.empty() ? "" : " " + args);
  return std::system(cmd.c_str());
}

}  // namespace

TEST_CASE("NCCL interposer: stand-in gets every call unchanged, spans carry bytes, peer, comm") {
  const std::string log = tempPath("calls") + ".log";
  const std::string db = tempPath("trace") + ".db";
  ::unlink(log.c_str());
  ::unlink(db.c_str());
  REQUIRE(run("FAKE_NCCL_LOG=" + log + " TRACERUN_OUTPUT=" + db +
              " LD_PRELOAD=" + NCCL_INTERPOSER) == 0);
  CHECK(lines(log) == kIssued);

  const std::vector<Expected> expected{
      {"nccl:CommInitRank", 0, -1, -1, -1}, {"nccl:GroupStart", 0, -1, -1, -1},
      {"nccl:AllReduce", 4000, 7, -1, -1},  {"nccl:Broadcast", 80, 4, -1, 1},
      {"nccl:AllGather", 512, 6, -1, -1},   {"nccl:ReduceScatter", 64 * 8 * 4, 8, -1, -1},
      {"nccl:Reduce", 28, 2, -1, 3},        {"nccl:Send", 100, 1, 3, -1},
      {"nccl:Recv", 100, 9, 1, -1},         {"nccl:GroupEnd", 0, -1, -1, -1},
      {"nccl:CommDestroy", 0, -1, -1, -1},
  };
  auto r = trace::TraceReader::open(db);
  std::vector<trace::SpanRow> spans;
  std::map<int64_t, std::map<std::string, int64_t>> args;
  std::map<int64_t, std::string> trackOf;
  for (const auto& t : r.tracks()) {
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (r.str(s.name).rfind("nccl:", 0) == 0) {
        spans.push_back(s);
        trackOf[s.id] = t.name;
      }
    });
    for (const auto& a : r.argsOfTrack(t.id)) args[a.span][r.str(a.key)] = a.value;
  }
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.start_ns < b.start_ns; });
  REQUIRE(spans.size() == expected.size());
  std::string commName;
  for (size_t i = 0; i < spans.size(); ++i) {
    const auto& s = spans[i];
    const auto& want = expected[i];
    INFO(want.op);
    CHECK(r.str(s.name) == want.op);
    CHECK(s.category == core::Category::kComm);
    CHECK(s.dur_ns >= 0);
    auto& a = args[s.id];
    CHECK(a["bytes"] == want.bytes);
    CHECK((a.count("dtype") ? a["dtype"] : -1) == want.dtype);
    CHECK((a.count("peer") ? a["peer"] : -1) == want.peer);
    CHECK((a.count("root") ? a["root"] : -1) == want.root);
    const bool onComm = want.op != "nccl:CommInitRank" && want.op != "nccl:GroupStart" &&
                        want.op != "nccl:GroupEnd";
    if (onComm) {
      CHECK(a["group_size"] == 4);
      CHECK(a["group_rank"] == 2);
      if (commName.empty()) commName = r.str(s.detail);
      CHECK(r.str(s.detail) == commName);
      CHECK(trackOf[s.id] == commName);
    } else {
      CHECK(trackOf[s.id] == "nccl");
    }
  }
  CHECK(commName.rfind("nccl ", 0) == 0);
  ::unlink(log.c_str());
  ::unlink(db.c_str());
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 28, 0)
TEST_CASE("NCCL interposer: 2.28's all-to-all, gather and scatter are forwarded and recorded") {
  // PyTorch on NCCL >= 2.28 calls ncclAlltoAll for all_to_all_single with equal splits: without
  // these the call was not recorded at all.
  const std::string log = tempPath("v228") + ".log";
  const std::string db = tempPath("v228") + ".db";
  ::unlink(log.c_str());
  ::unlink(db.c_str());
  REQUIRE(run("FAKE_NCCL_LOG=" + log + " TRACERUN_OUTPUT=" + db + " LD_PRELOAD=" +
                  NCCL_INTERPOSER,
              "v2.28") == 0);
  CHECK(lines(log) == std::vector<std::string>{
                          "GetUniqueId",
                          "CommInitRank nranks=4 id=fake-nccl-id rank=2",
                          "AlltoAll send=0x1000 recv=0x2000 count=32 dtype=7 stream=0x77",
                          "Gather send=0x1000 recv=0x2000 count=16 dtype=6 root=1 stream=0x77",
                          "Scatter send=0x1000 recv=0x2000 count=8 dtype=4 root=0 stream=0x77",
                          "CommDestroy comm=2",
                      });
  auto r = trace::TraceReader::open(db);
  // name -> (bytes, root, group_size)
  std::map<std::string, std::tuple<int64_t, int64_t, int64_t>> got;
  for (const auto& t : r.tracks()) {
    std::map<int64_t, std::map<std::string, int64_t>> args;
    for (const auto& a : r.argsOfTrack(t.id)) args[a.span][r.str(a.key)] = a.value;
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      auto& a = args[s.id];
      got[r.str(s.name)] = {a["bytes"], a.count("root") ? a["root"] : -1, a["group_size"]};
    });
  }
  // All-to-all: what the rank sends, 32 floats to each of 4 ranks; gather and scatter: one
  // rank's part.
  CHECK(got["nccl:AlltoAll"] == std::make_tuple(int64_t{32 * 4 * 4}, int64_t{-1}, int64_t{4}));
  CHECK(got["nccl:Gather"] == std::make_tuple(int64_t{16 * 2}, int64_t{1}, int64_t{4}));
  CHECK(got["nccl:Scatter"] == std::make_tuple(int64_t{8 * 8}, int64_t{0}, int64_t{4}));
  // The report's rows: an all_to_all, a gather and a scatter, each one call.
  const auto comm = trace::analysis::analyzeComm(r);
  std::map<std::string, int64_t> calls;
  for (const auto& c : comm.collectives) calls[c.op] += c.calls;
  CHECK(calls == std::map<std::string, int64_t>{{"all_to_all", 1}, {"gather", 1}, {"scatter", 1}});
  ::unlink(log.c_str());
  ::unlink(db.c_str());
}
#endif

TEST_CASE("NCCL interposer: ncclCommAbort is forwarded and traced on its communicator") {
  const std::string log = tempPath("abort") + ".log";
  const std::string db = tempPath("abort") + ".db";
  ::unlink(log.c_str());
  ::unlink(db.c_str());
  REQUIRE(run("FAKE_NCCL_LOG=" + log + " TRACERUN_OUTPUT=" + db + " LD_PRELOAD=" + NCCL_INTERPOSER,
              "abort") == 0);
  CHECK(lines(log) == kIssuedAbort);  // the stand-in got the abort, on the same communicator

  auto r = trace::TraceReader::open(db);
  std::vector<std::pair<trace::SpanRow, std::string>> spans;  // with their track's name
  std::map<int64_t, std::map<std::string, int64_t>> args;
  for (const auto& t : r.tracks()) {
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (r.str(s.name).rfind("nccl:", 0) == 0) spans.emplace_back(s, t.name);
    });
    for (const auto& a : r.argsOfTrack(t.id)) args[a.span][r.str(a.key)] = a.value;
  }
  std::sort(spans.begin(), spans.end(),
            [](const auto& a, const auto& b) { return a.first.start_ns < b.first.start_ns; });
  std::vector<std::string> names;
  for (const auto& [s, track] : spans) names.push_back(r.str(s.name));
  REQUIRE(names ==
          std::vector<std::string>{"nccl:CommInitRank", "nccl:AllReduce", "nccl:CommAbort"});
  const auto& [allReduce, allReduceTrack] = spans[1];
  const auto& [abort, abortTrack] = spans[2];
  CHECK(abort.category == core::Category::kComm);
  CHECK(abort.dur_ns >= 0);
  CHECK(abort.start_ns >= allReduce.start_ns + allReduce.dur_ns);
  // On the communicator it ends: the all-reduce's group, track, size and rank.
  CHECK(r.str(abort.detail).rfind("nccl ", 0) == 0);
  CHECK(r.str(abort.detail) == r.str(allReduce.detail));
  CHECK(abortTrack == allReduceTrack);
  CHECK(abortTrack == r.str(abort.detail));
  auto& a = args[abort.id];
  CHECK(a["bytes"] == 0);
  CHECK(a["group_size"] == 2);
  CHECK(a["group_rank"] == 1);
  CHECK(a.count("dtype") == 0);
  CHECK(a.count("peer") == 0);
  CHECK(args[allReduce.id]["bytes"] == 64);
  ::unlink(log.c_str());
  ::unlink(db.c_str());
}

TEST_CASE("NCCL interposer without a capture only forwards") {
  const std::string log = tempPath("plain") + ".log";
  ::unlink(log.c_str());
  REQUIRE(run("FAKE_NCCL_LOG=" + log + " LD_PRELOAD=" + NCCL_INTERPOSER) == 0);
  CHECK(lines(log) == kIssued);
  ::unlink(log.c_str());
}

#ifdef TRACERUN_BIN
namespace {

// Runs nccl_caller through `tracerun --capture words`; returns the names of its nccl: spans and
// fills *err with the launcher's and the program's stderr.
std::vector<std::string> ncclSpansThroughLauncher(const std::string& words, std::string* err) {
  const std::string stem = tempPath("launch_" + std::to_string(std::hash<std::string>{}(words)));
  const std::string log = stem + ".log", db = stem + ".db", errFile = stem + ".err";
  ::unlink(log.c_str());
  ::unlink(db.c_str());
  const std::string cmd = "FAKE_NCCL_LOG=" + log + " " + TRACERUN_BIN + " -q -o " + db +
                          " --capture " + words + " -- " + NCCL_CALLER + " 2>" + errFile;
  const int rc = std::system(cmd.c_str());
  std::ifstream in(errFile);
  err->assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  INFO(*err);
  REQUIRE(rc == 0);
  CHECK(lines(log) == kIssued);  // the stand-in got every call, interposed or not
  std::vector<std::string> names;
  auto r = trace::TraceReader::open(db);
  for (const auto& t : r.tracks()) {
    r.forEachSpan(t.id, [&](const trace::SpanRow& s) {
      if (r.str(s.name).rfind("nccl:", 0) == 0) names.push_back(r.str(s.name));
    });
  }
  for (const auto& f : {log, db, errFile}) ::unlink(f.c_str());
  return names;
}

size_t count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

}  // namespace

TEST_CASE("launcher: --capture comm preloads the NCCL interposer and records every call") {
  std::string err;
  const auto names = ncclSpansThroughLauncher("comm", &err);
  CHECK(names.size() == 11);  // the calls of the first case, GetUniqueId excepted
  CHECK(std::count(names.begin(), names.end(), "nccl:AllReduce") == 1);
  CHECK(count(err, "CUDA capture off") == 0);
}

TEST_CASE("launcher: --capture with cuda says once that CUDA capture is off, NCCL calls recorded") {
  std::string err;
  const auto names = ncclSpansThroughLauncher("ops,comm,cuda", &err);
  INFO(err);
  CHECK(names.size() == 11);
  CHECK(count(err, "tracerun: CUDA capture off: ") == 1);
}

#if NCCL_VERSION_CODE >= NCCL_VERSION(2, 18, 0)  // ncclCommSplit is 2.18's
TEST_CASE("launcher: four NCCL ranks, a split communicator: sends paired, set-up kept apart") {
  // Each rank: a 300 ms ncclCommInitRank on the world, ncclCommSplit by rank % 2, then in each
  // half its rank 0 sends three messages to its rank 1 (NCCL's peer: a rank of the half). The
  // split communicator's name is the same on its two ranks, so the report pairs trace ranks
  // 0 -> 2 and 1 -> 3, and the set-up is not communication time.
  const std::string stem = tempPath("split");
  const std::string db = stem + ".db", errFile = stem + ".err";
  ::unlink(db.c_str());
  const std::string cmd = std::string("FAKE_NCCL_INIT_MS=300 FAKE_NCCL_SPLIT_SIZE=2 ") +
                          TRACERUN_BIN + " -q -o " + db + " --nproc-per-node 4 --capture comm -- " +
                          NCCL_CALLER + " split 2>" + errFile;
  const int rc = std::system(cmd.c_str());
  std::ifstream in(errFile);
  const std::string err((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  INFO(err);
  REQUIRE(rc == 0);
  const auto reader = trace::TraceReader::open(db);
  const auto a = trace::analysis::analyzeComm(reader);
  CHECK(a.collectives.empty());
  std::map<std::pair<int, int>, trace::analysis::PointToPointStats> byPair;
  for (const auto& p : a.p2p) byPair[{p.src, p.dst}] = p;
  CHECK(byPair.size() == 2);
  for (const auto& [src, dst] : {std::pair<int, int>{0, 2}, {1, 3}}) {
    INFO(src << " -> " << dst);
    REQUIRE(byPair.count({src, dst}) == 1);
    CHECK(byPair[{src, dst}].messages == 3);
    CHECK(byPair[{src, dst}].bytes == 3 * 64 * 4);
    CHECK(byPair[{src, dst}].matched == 3);
  }
  std::map<std::string, trace::analysis::CommControlStats> control;
  for (const auto& c : a.control) control[c.name] = c;
  CHECK(control["nccl:CommInitRank"].ranks == 4);
  CHECK(control["nccl:CommInitRank"].total_ns >= 4 * int64_t{300'000'000});
  CHECK(control["nccl:CommSplit"].calls == 4);
  CHECK(control["nccl:CommDestroy"].calls == 8);
  for (const auto& r : a.ranks) CHECK(r.comm_ns < 300'000'000);  // the set-up is not in it
  for (const auto& f : {db, errFile}) ::unlink(f.c_str());
}
#endif

TEST_CASE("launcher: without comm the NCCL calls are not recorded") {
  std::string err;
  CHECK(ncclSpansThroughLauncher("ops,memory", &err).empty());
}
#endif
