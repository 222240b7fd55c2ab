// The collective decorator (tracerun/traced_group.h) on real Gloo groups of two processes: the
// recorded op, bytes, dtype, peer and group equal what the test issued, completion >= issue, and
// every collective's result is what it is without the decorator. Not a test of Gloo itself.
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <string>
#include <vector>

#include "tracerun/traced_group.h"  // before torch_compat.h (enables its c10d section)

#include <torch/csrc/distributed/c10d/FileStore.hpp>
#include <torch/torch.h>

#include "capture.h"
#include "tracerun/trace/reader.h"
#include "../support/process_scratch.h"

using namespace tracerun;

namespace {

std::string tempPath(const std::string& stem, const char* ext) {
  return testing::processScratchPath("comm_" + stem) + ext;
}

// What one rank issues, with checks of the results; returns the number of wrong results.
// Group ranks 0 and 1 stand for global ranks 5 and 9 (to check the mapping of peers and roots).
int runCollectives(const compat::CollectiveGroupPtr& pg, int rank) {
  int wrong = 0;
  const float me = static_cast<float>(rank + 1);
  {  // allreduce: 1 + 2 everywhere
    std::vector<at::Tensor> t{torch::full({4}, me)};
    pg->allreduce(t)->wait();
    wrong += !torch::equal(t[0], torch::full({4}, 3.0f));
  }
  {  // broadcast from group rank 1
    std::vector<at::Tensor> t{torch::full({3}, int64_t{rank == 1 ? 42 : 0}, torch::kInt64)};
    c10d::BroadcastOptions o;
    o.rootRank = 1;
    pg->broadcast(t, o)->wait();
    wrong += !torch::equal(t[0], torch::full({3}, int64_t{42}, torch::kInt64));
  }
  {  // allgather of doubles
    std::vector<at::Tensor> in{torch::full({2}, double(rank), torch::kFloat64)};
    std::vector<std::vector<at::Tensor>> out{
        {torch::zeros({2}, torch::kFloat64), torch::zeros({2}, torch::kFloat64)}};
    pg->allgather(out, in)->wait();
    wrong += !torch::equal(out[0][0], torch::zeros({2}, torch::kFloat64));
    wrong += !torch::equal(out[0][1], torch::ones({2}, torch::kFloat64));
  }
  {  // send/recv both ways, different sizes and tags
    std::vector<at::Tensor> a{torch::arange(5, torch::kFloat32)};
    std::vector<at::Tensor> b{torch::zeros({6}, torch::kFloat32)};
    if (rank == 0) {
      pg->send(a, 1, 7)->wait();
      pg->recv(b, 1, 8)->wait();
      wrong += !torch::equal(b[0], torch::arange(6, torch::kFloat32) * 2);
    } else {
      std::vector<at::Tensor> got{torch::zeros({5}, torch::kFloat32)};
      pg->recv(got, 0, 7)->wait();
      wrong += !torch::equal(got[0], a[0]);
      std::vector<at::Tensor> back{torch::arange(6, torch::kFloat32) * 2};
      pg->send(back, 0, 8)->wait();
    }
  }
  {  // reduce to group rank 0
    std::vector<at::Tensor> t{torch::full({8}, me)};
    c10d::ReduceOptions o;
    o.rootRank = 0;
    pg->reduce(t, o)->wait();
    if (rank == 0) wrong += !torch::equal(t[0], torch::full({8}, 3.0f));
  }
  pg->barrier()->wait();
  return wrong;
}

compat::CollectiveGroupPtr makeGroup(const std::string& storePath, int rank) {
  auto store = c10::make_intrusive<c10d::FileStore>(storePath, 2);
  auto gloo = compat::makeGlooGroup(store, rank, 2, "127.0.0.1", std::chrono::seconds(60));
  return traceGroup(gloo, "pair", {5, 9});
}

struct Issued {
  std::string op;
  int64_t bytes, dtype, peer, root, tag;
};

}  // namespace

TEST_CASE("traced Gloo group: recorded collectives equal what was issued, results unchanged") {
  at::set_num_threads(1);
  const std::string storePath = tempPath("store", "");
  const std::string dbPath = tempPath("trace", ".db");
  ::unlink(storePath.c_str());
  const pid_t child = ::fork();
  REQUIRE(child >= 0);
  if (child == 0) {  // rank 1: no capture; the decorator is a pass-through there
    int wrong = 1;
    try {
      auto pg = makeGroup(storePath, 1);
      wrong = runCollectives(pg, 1);
    } catch (...) {
    }
    ::_exit(wrong == 0 ? 0 : 1);
  }

  interpose::CaptureConfig config;
  config.output = dbPath;
  config.signal_handlers = false;
  REQUIRE(interpose::startCapture(config));
  auto pg = makeGroup(storePath, 0);
  REQUIRE(dynamic_cast<TracedGroup*>(pg.get()) != nullptr);
  CHECK(pg->getBackendName() == "gloo");
  CHECK(runCollectives(pg, 0) == 0);
  pg.reset();
  interpose::stopCapture();
  int status = 0;
  REQUIRE(::waitpid(child, &status, 0) == child);
  CHECK(WIFEXITED(status));
  CHECK(WEXITSTATUS(status) == 0);

  const int64_t f32 = static_cast<int64_t>(at::kFloat);
  const std::vector<Issued> issued{
      {"c10d:allreduce", 16, f32, -1, -1, -1},
      {"c10d:broadcast", 24, static_cast<int64_t>(at::kLong), -1, 9, -1},
      {"c10d:allgather", 16, static_cast<int64_t>(at::kDouble), -1, -1, -1},
      {"c10d:send", 20, f32, 9, -1, 7},
      {"c10d:recv", 24, f32, 9, -1, 8},
      {"c10d:reduce", 32, f32, -1, 5, -1},
      {"c10d:barrier", 0, -1, -1, -1, -1},
  };

  auto r = trace::TraceReader::open(dbPath);
  int64_t track = 0;
  for (const auto& t : r.tracks()) {
    if (t.name == "c10d pair [5,9]") track = t.id;
  }
  REQUIRE(track != 0);
  std::vector<trace::SpanRow> spans;
  r.forEachSpan(track, [&](const trace::SpanRow& s) { spans.push_back(s); });
  REQUIRE(spans.size() == issued.size());
  std::map<int64_t, std::map<std::string, int64_t>> argsBySpan;
  for (const auto& a : r.argsOfTrack(track)) argsBySpan[a.span][r.str(a.key)] = a.value;
  // Issued one after another (each waited for): spans in start order are the issue order.
  for (size_t i = 0; i < issued.size(); ++i) {
    const auto& s = spans[i];
    const auto& want = issued[i];
    INFO(want.op);
    CHECK(r.str(s.name) == want.op);
    CHECK(s.category == core::Category::kComm);
    CHECK(r.str(s.detail) == "pair");
    CHECK(s.dur_ns >= 0);
    auto& args = argsBySpan[s.id];
    CHECK(args["bytes"] == want.bytes);
    CHECK(args["group_size"] == 2);
    CHECK(args["group_rank"] == 0);
    CHECK(args["seq"] == static_cast<int64_t>(i));
    CHECK((args.count("dtype") ? args["dtype"] : -1) == want.dtype);
    CHECK((args.count("peer") ? args["peer"] : -1) == want.peer);
    CHECK((args.count("root") ? args["root"] : -1) == want.root);
    CHECK((args.count("tag") ? args["tag"] : -1) == want.tag);
    if (i > 0) CHECK(s.start_ns >= spans[i - 1].start_ns);
  }
  ::unlink(dbPath.c_str());
  ::unlink(storePath.c_str());
}

TEST_CASE("traceGroup without a capture running records nothing and forwards") {
  // libtracerun is linked here, so traceGroup decorates; with no capture the calls pass through.
  const std::string storePath = tempPath("solo", "");
  ::unlink(storePath.c_str());
  auto store = c10::make_intrusive<c10d::FileStore>(storePath, 1);
  auto pg = traceGroup(compat::makeGlooGroup(store, 0, 1, "127.0.0.1", std::chrono::seconds(30)),
                       "solo");
  std::vector<at::Tensor> t{torch::full({3}, 2.0f)};
  pg->allreduce(t)->wait();
  CHECK(torch::equal(t[0], torch::full({3}, 2.0f)));
  CHECK(tracerun_comm_capturing() == 0);
  ::unlink(storePath.c_str());
}
