// Interposes libtorch's Engine::evaluate_function to know which autograd node a BACKWARD_FUNCTION
// RecordFunction belongs to (it carries only the name and sequence number). Nothing is recorded
// here: op_capture.cpp reads tlsEvaluatingNode in its callbacks.
//
// Why this symbol (libtorch 1.13, docs/capture.md "Autograd graph"): the engine's thread_main calls
// evaluate_function(graph_task, Node* func, ...) through the PLT (libtorch_cpu.so has a JUMP_SLOT
// relocation for it), so the definition below, exported by libtracerun.so (libtracerun.map), wins
// when libtracerun is preloaded or linked ahead of libtorch, and forwards to libtorch's own, found
// with dlsym(RTLD_NEXT). The public alternatives fall short: NodeGuard is not exported, and
// get_current_graph_task_nodes_in_graph() lists every node but the root and not which one runs.
#include "autograd_engine.h"

#include "tracerun/torch_compat.h"

namespace tracerun::interpose {

__thread const void* tlsEvaluatingNode __attribute__((tls_model("initial-exec"))) = nullptr;

}  // namespace tracerun::interpose

#if TRACERUN_INTERPOSE_AUTOGRAD_ENGINE
#include <torch/csrc/autograd/engine.h>

#include "next_definition.h"

namespace tracerun::interpose {
namespace {

using torch::autograd::Engine;
using torch::autograd::GraphTask;
using torch::autograd::InputBuffer;
using torch::autograd::Node;
using torch::autograd::ReadyQueue;

// libtorch's evaluate_function, called as a plain function with `this` first (Itanium C++ ABI).
using EvaluateFn = void (*)(Engine*, std::shared_ptr<GraphTask>&, Node*, InputBuffer&,
                            const std::shared_ptr<ReadyQueue>&);

EvaluateFn realEvaluate() {
  static const EvaluateFn fn = [] {
    return reinterpret_cast<EvaluateFn>(
        nextDefinition(compat::kEngineEvaluateFunctionSymbol,
                       "autograd Engine::evaluate_function (is libtorch_cpu 1.13 loaded?)"));
  }();
  return fn;
}

// Restores the enclosing node when the evaluation returns or throws (reentrant backward nests).
struct EvaluatingNodeScope {
  explicit EvaluatingNodeScope(const Node* node) noexcept : saved(tlsEvaluatingNode) {
    tlsEvaluatingNode = node;
  }
  ~EvaluatingNodeScope() { tlsEvaluatingNode = saved; }
  EvaluatingNodeScope(const EvaluatingNodeScope&) = delete;
  EvaluatingNodeScope& operator=(const EvaluatingNodeScope&) = delete;
  const void* saved;
};

}  // namespace
}  // namespace tracerun::interpose

// The interposed definition (exported by libtracerun.map).
void torch::autograd::Engine::evaluate_function(
    std::shared_ptr<GraphTask>& graph_task, Node* func, InputBuffer& inputs,
    const std::shared_ptr<ReadyQueue>& cpu_ready_queue) {
  const tracerun::interpose::EvaluateFn real = tracerun::interpose::realEvaluate();
  tracerun::interpose::EvaluatingNodeScope scope(func);
  real(this, graph_task, func, inputs, cpu_ready_queue);
}
#endif  // TRACERUN_INTERPOSE_AUTOGRAD_ENGINE
