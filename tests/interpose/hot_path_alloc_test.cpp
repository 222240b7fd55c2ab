// The capture's hot path allocates nothing: this binary counts every malloc-family call made by
// the calling thread (it defines malloc & co. over glibc's) and compares a steady-state training
// step traced (ops, scopes, memory; with and without shapes) with the same step under an empty
// RecordFunction callback that asks for the same inputs. (Any active callback makes libtorch itself
// allocate: autograd builds "evaluate_function: X" names, boxing inputs builds lists.)
#include <torch/torch.h>
#include <catch2/catch.hpp>

#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#include "capture.h"
#include "tracerun/annotate.h"
#include "../support/process_scratch.h"

// ---- counting allocation functions (this executable's definitions win over libc's) ------------

extern "C" {
void* __libc_malloc(size_t);
void* __libc_calloc(size_t, size_t);
void* __libc_realloc(void*, size_t);
void* __libc_memalign(size_t, size_t);
void __libc_free(void*);

__thread uint64_t tAllocations = 0;

void* malloc(size_t n) {
  ++tAllocations;
  return __libc_malloc(n);
}
void* calloc(size_t n, size_t m) {
  ++tAllocations;
  return __libc_calloc(n, m);
}
void* realloc(void* p, size_t n) {
  ++tAllocations;
  return __libc_realloc(p, n);
}
void* memalign(size_t a, size_t n) {
  ++tAllocations;
  return __libc_memalign(a, n);
}
void* aligned_alloc(size_t a, size_t n) {
  ++tAllocations;
  return __libc_memalign(a, n);
}
int posix_memalign(void** p, size_t a, size_t n) {
  ++tAllocations;
  *p = __libc_memalign(a, n);
  return *p != nullptr ? 0 : ENOMEM;
}
void free(void* p) {
  __libc_free(p);
}
}

namespace {

struct Step {
  torch::nn::Linear fc1{8, 16}, fc2{16, 1};
  std::unique_ptr<torch::optim::Adam> opt;
  torch::Tensor x = torch::randn({4, 8}), y = torch::randn({4, 1});
  Step() {
    auto params = fc1->parameters();
    for (auto& p : fc2->parameters()) params.push_back(p);
    opt = std::make_unique<torch::optim::Adam>(params, torch::optim::AdamOptions(1e-2));
  }
  void run() {
    tracerun::Step step(1);
    tracerun::Scope mb("microbatch", {{"microbatch", 0}});
    opt->zero_grad();
    torch::Tensor loss;
    {
      tracerun::MemoryTag tag(tracerun::MemoryCategory::kActivation);
      loss = torch::mse_loss(fc2(torch::relu(fc1(x))), y);
    }
    loss.backward();
    opt->step();
    tracerun::counter("loss", 1.0);
  }
};

std::unique_ptr<at::ObserverContext> emptyStart(const at::RecordFunction&) {
  return nullptr;
}
void emptyEnd(const at::RecordFunction&, at::ObserverContext*) {}

uint64_t allocationsPerStep(Step& s, int steps) {
  const uint64_t before = tAllocations;
  for (int i = 0; i < steps; ++i) s.run();
  return (tAllocations - before) / steps;
}

}  // namespace

// Steady-state allocations per step with an empty callback (needsInputs as given), then traced.
// tensors: the capture records tensor identities; the empty callback then also needs the outputs.
std::pair<uint64_t, uint64_t> emptyVersusTraced(bool shapes, bool tensors = false) {
  at::set_num_threads(1);
  Step s;
  for (int i = 0; i < 5; ++i) s.run();  // optimizer state exists from here on
  const uint64_t untraced = allocationsPerStep(s, 20);
  REQUIRE(untraced > 0);  // the counter works

  // The scopes the capture registers for (ops, backward nodes, user scopes).
  const auto handle = at::addGlobalCallback(
      at::RecordFunctionCallback(&emptyStart, &emptyEnd)
          .needsInputs(shapes || tensors)
          .needsOutputs(tensors)
          .scopes({at::RecordScope::FUNCTION, at::RecordScope::BACKWARD_FUNCTION,
                   at::RecordScope::USER_SCOPE}));
  for (int i = 0; i < 2; ++i) s.run();
  const uint64_t empty = allocationsPerStep(s, 20);
  at::removeCallback(handle);

  const std::string path = tracerun::testing::processScratchPath("alloc") + ".db";
  tracerun::interpose::CaptureConfig config;
  config.output = path;
  config.shapes = shapes;
  config.tensors = tensors;
  config.signal_handlers = false;
  REQUIRE(tracerun::interpose::startCapture(config));
  for (int i = 0; i < 5; ++i) s.run();  // first sight of each name and shape: interned once
  const uint64_t traced = allocationsPerStep(s, 20);
  tracerun::interpose::stopCapture();
  ::unlink(path.c_str());
  return {empty, traced};
}

TEST_CASE("a traced step allocates exactly what it does under an empty callback with inputs") {
  const auto [empty, traced] = emptyVersusTraced(true);
  CHECK(traced == empty);
}

TEST_CASE("a traced step without shapes allocates exactly what it does under an empty callback") {
  const auto [empty, traced] = emptyVersusTraced(false);
  CHECK(traced == empty);
}

TEST_CASE(
    "a step traced with tensor identities allocates what it does under a callback with outputs") {
  const auto [empty, traced] = emptyVersusTraced(true, true);
  CHECK(traced == empty);
}
