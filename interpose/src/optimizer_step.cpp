// Interposes the step() of libtorch's own optimizers (torch::optim::SGD, Adam, AdamW, Adagrad,
// RMSprop, LBFGS) so that an unmodified C++ program's optimizer steps mark its training steps
// (optimizer_steps.h says what is recorded; op_capture.cpp records it). Nothing else is changed:
// each definition below forwards to libtorch's own, found with dlsym(RTLD_NEXT).
//
// Why this works for virtual calls too (libtorch 1.13 and the 2.x wheels): step() is virtual, and
// a program usually calls it through the vtable. libtorch_cpu.so's vtables refer to each step()
// through an R_X86_64_64 relocation against its exported symbol (it is not linked with
// -Bsymbolic), so the dynamic linker fills the slot with the first definition in lookup order:
// ours when libtracerun.so is preloaded or linked ahead of libtorch (libtracerun.map exports
// them). A direct, devirtualised call goes through the PLT and arrives here the same way.
// Python's torch.optim never calls these (it has its own optimizers in Python).
#include <torch/optim/adagrad.h>
#include <torch/optim/adam.h>
#include <torch/optim/adamw.h>
#include <torch/optim/lbfgs.h>
#include <torch/optim/rmsprop.h>
#include <torch/optim/sgd.h>

#include <utility>

#include "next_definition.h"
#include "optimizer_steps.h"
#include "tracerun/annotate.h"

namespace tracerun::interpose {
namespace {

using LossClosure = torch::optim::Optimizer::LossClosure;
// A step() called as a plain function with `this` first (Itanium C++ ABI; the returned Tensor's
// hidden pointer comes before it either way).
using StepFn = at::Tensor (*)(torch::optim::Optimizer*, LossClosure);

// libtorch's own definition of `symbol`. A missing one is a libtorch this file does not know: said
// once, and the program stops (it cannot train without its optimizer).
StepFn realStep(const char* symbol) {
  return reinterpret_cast<StepFn>(nextDefinition(symbol, symbol));
}

at::Tensor steppedBy(StepFn real, torch::optim::Optimizer* self, LossClosure closure) {
  if (!optimizerStepBegins()) return real(self, std::move(closure));
  at::Tensor loss;
  {
    const PhaseScope scope(vocab::phase::kOptimizer);  // a RecordFunction user scope, on the stack
    loss = real(self, std::move(closure));
  }
  optimizerStepEnds();
  return loss;
}

}  // namespace
}  // namespace tracerun::interpose

// The interposed definitions (exported by libtracerun.map). The symbol names are those of
// libtorch's own definitions, the same in 1.13 and 2.x (optimizer_steps_test checks them).
#define TRACERUN_INTERPOSE_STEP(Class, symbol)                                             \
  at::Tensor torch::optim::Class::step(LossClosure closure) {                              \
    static const tracerun::interpose::StepFn real = tracerun::interpose::realStep(symbol); \
    return tracerun::interpose::steppedBy(real, this, std::move(closure));                 \
  }

TRACERUN_INTERPOSE_STEP(SGD, "_ZN5torch5optim3SGD4stepESt8functionIFN2at6TensorEvEE")
TRACERUN_INTERPOSE_STEP(Adam, "_ZN5torch5optim4Adam4stepESt8functionIFN2at6TensorEvEE")
TRACERUN_INTERPOSE_STEP(AdamW, "_ZN5torch5optim5AdamW4stepESt8functionIFN2at6TensorEvEE")
TRACERUN_INTERPOSE_STEP(Adagrad, "_ZN5torch5optim7Adagrad4stepESt8functionIFN2at6TensorEvEE")
TRACERUN_INTERPOSE_STEP(RMSprop, "_ZN5torch5optim7RMSprop4stepESt8functionIFN2at6TensorEvEE")
TRACERUN_INTERPOSE_STEP(LBFGS, "_ZN5torch5optim5LBFGS4stepESt8functionIFN2at6TensorEvEE")
#undef TRACERUN_INTERPOSE_STEP
