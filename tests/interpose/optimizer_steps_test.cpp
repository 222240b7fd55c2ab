// End-to-end: the steps of an unmodified C++ program that trains with libtorch's own optimizers
// (interpose/src/optimizer_steps.h). optimizer_steps_prog runs under the tracerun binary and
// prints CLOCK_MONOTONIC readings before each iteration's first op and after optimizer.step()
// returned; every "step" phase span must lie inside its iteration's readings, hold that
// iteration's "optimizer" phase, and be numbered as the program counted. No libtorch in this
// binary; no timed assertions.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "../support/child_process.h"
#include "tracerun/core/vocabulary.h"
#include "tracerun/trace/reader.h"

using namespace tracerun;

namespace {

const std::string& scratch() {
  static const std::string dir = [] {
    ::setenv("OMP_NUM_THREADS", "1", 1);
    return testing::processScratchDir("tracerun_optimizer_steps");
  }();
  return dir;
}

struct Window {
  int64_t begin = 0, end = 0;
};

struct Phase {
  int64_t start = 0, end = 0, step = -1;
};

struct Traced {
  testing::ProcessResult result;
  std::map<int, Window> clock;                       // iteration -> the program's readings
  std::vector<Phase> steps, optimizers, iterations;  // iterations: the program's own scopes
  int64_t origin = 0;  // the trace's origin_ns: its times + origin = CLOCK_MONOTONIC
};

Traced runTraced(const std::string& name, std::vector<std::string> args) {
  const std::string db = scratch() + "/" + name + ".db";
  std::vector<std::string> argv = {TRACERUN_BIN, "-o", db, "-q", "--", STEPS_PROG, "--print-clock"};
  argv.insert(argv.end(), args.begin(), args.end());
  Traced t;
  t.result = testing::Child(argv, scratch()).wait();
  INFO(t.result.describe());
  REQUIRE(t.result.code == 0);
  std::istringstream out(t.result.out);
  for (std::string line; std::getline(out, line);) {
    int k = 0;
    long long b = 0, e = 0;
    if (std::sscanf(line.c_str(), "clock step %d %lld %lld", &k, &b, &e) == 3) t.clock[k] = {b, e};
  }
  const auto r = trace::TraceReader::open(db);
  t.origin = std::atoll(r.meta("origin_ns").c_str());
  for (const auto& track : r.tracks()) {
    std::vector<trace::SpanRow> phases;
    r.forEachSpan(track.id, [&](const trace::SpanRow& s) {
      if (s.category == core::Category::kPhase) phases.push_back(s);
      if (r.str(s.name) == "iteration") t.iterations.push_back({s.start_ns, s.end_ns(), -1});
    });
    for (const auto& s : phases) {
      Phase p{s.start_ns, s.end_ns(), -1};
      if (r.str(s.name) == vocab::phase::kStep) {
        for (const auto& a : r.args(s.id)) {
          if (r.str(a.key) == vocab::arg::kStep) p.step = a.value;
        }
        t.steps.push_back(p);
      } else if (r.str(s.name) == vocab::phase::kOptimizer) {
        t.optimizers.push_back(p);
      }
    }
  }
  return t;
}

// Steps first..last, numbered as the program counted; each holds exactly one optimizer phase,
// which ends it. On the program's clock (origin_ns puts the trace's times on CLOCK_MONOTONIC; 1 ms
// of slack for the capture's clock fit, as launcher_outer_test allows): a step begins after the
// previous iteration's step() returned (the first op after it opens the step: here the previous
// iteration's loss.item(); step 1, after tagTraining, in its own iteration) and ends before its
// own iteration's step() returned, but after that iteration's 3 ms sleep began.
void checkSteps(const Traced& t, int first, int last) {
  INFO(t.result.out);
  REQUIRE(static_cast<int>(t.steps.size()) == last - first + 1);
  const int64_t slack = 1'000'000, sleep = 3'000'000;
  for (size_t i = 0; i < t.steps.size(); ++i) {
    const Phase& s = t.steps[i];
    const int k = static_cast<int>(s.step);
    INFO("step span " << i << " numbered " << k);
    CHECK(k == first + static_cast<int>(i));
    REQUIRE(t.clock.count(k) == 1);
    const int64_t opened = k == 1 ? t.clock.at(1).begin : t.clock.at(k - 1).end;
    CHECK(s.start + t.origin >= opened - slack);
    CHECK(s.end + t.origin <= t.clock.at(k).end + slack);
    CHECK(s.end + t.origin >= t.clock.at(k).begin + sleep - slack);
    int inside = 0;
    for (const Phase& o : t.optimizers) inside += o.start >= s.start && o.end <= s.end;
    CHECK(inside == 1);
  }
}

}  // namespace

TEST_CASE("C++ optimizers: each step() of an unmodified program ends a step, from the second on",
          "[optimizer_steps]") {
  for (const std::string kind : {"sgd", "adam", "adamw", "adagrad", "rmsprop", "lbfgs"}) {
    INFO(kind);
    const Traced t = runTraced(kind, {"--optimizer", kind, "--steps", "4"});
    CHECK(t.optimizers.size() == 4);  // every call, the first included
    checkSteps(t, 2, 4);
  }
}

TEST_CASE("C++ optimizers: a step() called through Optimizer& (the vtable) is seen too",
          "[optimizer_steps]") {
  const Traced t = runTraced("virtual", {"--optimizer", "adamw", "--steps", "4", "--virtual"});
  CHECK(t.optimizers.size() == 4);
  checkSteps(t, 2, 4);
}

TEST_CASE("C++ optimizers: tagTraining marks where training begins, so step 1 is a step",
          "[optimizer_steps]") {
  const Traced t = runTraced("tag", {"--optimizer", "adam", "--steps", "3", "--tag"});
  checkSteps(t, 1, 3);
}

TEST_CASE("C++ optimizers: evaluation after the last step() opens no step of its own",
          "[optimizer_steps]") {
  const Traced t =
      runTraced("eval", {"--optimizer", "sgd", "--steps", "3", "--tag", "--eval-after"});
  CHECK(t.result.out.find("eval ") != std::string::npos);
  checkSteps(t, 1, 3);
}

TEST_CASE("C++ optimizers: a program that marks its own steps keeps exactly its own",
          "[optimizer_steps]") {
  const Traced t = runTraced("own", {"--optimizer", "adam", "--steps", "3", "--own-steps"});
  REQUIRE(t.steps.size() == 3);
  for (size_t i = 0; i < t.steps.size(); ++i) CHECK(t.steps[i].step == static_cast<int>(i) + 1);
  CHECK(t.optimizers.empty());  // the program's steps are its own: nothing of ours inside
}

TEST_CASE("C++ optimizers: a step() inside the program's own iteration scope ends the step with it",
          "[optimizer_steps]") {
  // The iteration's scope opens the step (it is the first event after the previous step()), and
  // step() runs inside it: the step must end when the iteration scope does, both whole.
  const Traced t = runTraced(
      "iteration", {"--optimizer", "adamw", "--steps", "4", "--tag", "--iteration-scope"});
  checkSteps(t, 1, 4);
  REQUIRE(t.iterations.size() == 4);
  for (const Phase& step : t.steps) {
    INFO("step " << step.step);
    const Phase* iteration = nullptr;
    const Phase* optimizer = nullptr;
    for (const Phase& it : t.iterations) {
      if (it.start >= step.start && it.end <= step.end) iteration = &it;
    }
    for (const Phase& o : t.optimizers) {
      if (o.start >= step.start && o.end <= step.end) optimizer = &o;
    }
    REQUIRE(iteration != nullptr);
    REQUIRE(optimizer != nullptr);
    // Whole: the iteration went on 3 ms after step() (not cut at the optimizer's end), and the
    // step ended with it.
    CHECK(iteration->end >= optimizer->end + 3'000'000);
    CHECK(step.end >= iteration->end);
  }
}
