// tracerun's annotation API: the one header of ours that trainer/ and user programs include (it
// brings annotate_abi.h and the names of tracerun/core/vocabulary.h). Scopes, steps, module scopes,
// counters and memory-category tags. Needs libtorch only, never libtracerun.
//
// How it works
// - Scopes are libtorch RecordFunction user scopes (RecordScope::USER_SCOPE), so libtorch's own
//   profiler (torch::autograd::profiler, torch.profiler, Kineto) shows them by name, with or
//   without tracerun.
// - libtracerun.so defines the weak entry points declared below. When it is loaded (linked, or
//   LD_PRELOADed by `tracerun -- PROGRAM`) it adds what RecordFunction cannot carry: the category
//   (user / phase / module), integer arguments, a module's type, counters and memory tags. When it
//   is not loaded, those entry points are null and every call below is a no-op.
//
// Cost when nothing traces (no tracerun, no profiler): a Scope asks libtorch whether any
// RecordFunction callback is active (the same check every ATen op makes; ~9 ns measured here) and
// takes one predictable branch. Counters and MemoryTag cost one branch on a null pointer without
// libtracerun, and one call when it is loaded. Names and keys are copied (interned) when recorded;
// they only need to live until the call returns.
//
// Threading and pairing contract
// - Scope, Step, PhaseScope and ModuleScope are RAII objects for the stack: construct and destroy
//   each on the same thread, strictly nested (inner ones end first). Do not copy, move, or hand
//   them to another thread. end() closes one early; the destructor then does nothing.
// - MemoryTag sets the category of allocations made by the calling thread until it is destroyed;
//   tags nest (the innermost wins) and restore the previous tag. Work that libtorch hands to its
//   intra-op pool threads is not tagged. A free carries the category its allocation had.
// - counter() may be called from any thread at any time; each name is one counter track.
// - Arguments: at most kMaxArgs per scope (extra ones are ignored), keys are short ASCII names.
#pragma once

#include <ATen/record_function.h>
#include <c10/util/Optional.h>

#include <cstdint>
#include <initializer_list>

// The C entry points into libtracerun.so (weak), MemoryCategory and ScopeKind.
#include "tracerun/annotate_abi.h"
// The names tracerun's analyses read (phases, pipeline messages, argument keys, counters):
// tracerun::vocab::phase::kForward, vocab::arg::kMicrobatch, ...
#include "tracerun/core/vocabulary.h"

namespace tracerun {

struct Arg {
  const char* key;  // e.g. "stage", "chunk", "microbatch"
  int64_t value;
};

inline constexpr int kMaxArgs = 4;

// True while tracerun is capturing in this process (e.g. to skip computing costly arguments).
inline bool capturing() noexcept {
  return &tracerun_annotate_capturing != nullptr && tracerun_annotate_capturing() != 0;
}

// A named span with up to kMaxArgs integer arguments:
//   tracerun::Scope s("microbatch", {{"stage", 1}, {"chunk", 0}, {"microbatch", 3}});
class Scope {
 public:
  explicit Scope(const char* name, std::initializer_list<Arg> args = {})
      : Scope(ScopeKind::kUser, name, nullptr, args.begin(), args.size()) {}
  ~Scope() = default;  // the RecordFunction's destructor ends the scope
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

  // Ends the scope now (idempotent).
  void end() { rf_.reset(); }
  // Whether anything (tracerun or a profiler) records this scope.
  bool active() const noexcept { return rf_.has_value(); }

 protected:
  Scope(ScopeKind kind, const char* name, const char* detail, const Arg* args, size_t n) {
    auto callbacks = at::getStepCallbacksUnlessEmpty(at::RecordScope::USER_SCOPE);
    if (C10_UNLIKELY(callbacks.has_value())) begin(*callbacks, kind, name, detail, args, n);
  }

 private:
  C10_NOINLINE void begin(at::StepCallbacks& callbacks, ScopeKind kind, const char* name,
                          const char* detail, const Arg* args, size_t n) {
    rf_.emplace(std::move(callbacks));
    rf_->before(name);
    if (&tracerun_annotate_attach == nullptr) return;
    tracerun_annotate_arg packed[kMaxArgs];
    int count = 0;
    for (; count < kMaxArgs && static_cast<size_t>(count) < n; ++count) {
      packed[count] = tracerun_annotate_arg{args[count].key, args[count].value};
    }
    tracerun_annotate_attach(&*rf_, static_cast<int>(kind), detail, packed, count);
  }

  c10::optional<at::RecordFunction> rf_;
};

// A training phase ("forward", "backward", "optimizer", "grad_allreduce"...), drawn as a phase.
class PhaseScope : public Scope {
 public:
  explicit PhaseScope(const char* name, std::initializer_list<Arg> args = {})
      : Scope(ScopeKind::kPhase, name, nullptr, args.begin(), args.size()) {}
};

// One training step: a phase span named "step" with argument step=<n>.
class Step : public Scope {
 public:
  explicit Step(int64_t step) : Step(Arg{vocab::arg::kStep, step}) {}

 private:
  explicit Step(Arg arg) : Scope(ScopeKind::kPhase, vocab::phase::kStep, nullptr, &arg, 1) {}
};

// Training begins on the calling thread. A program that trains with libtorch's own optimizers
// (torch::optim::SGD, Adam, AdamW, Adagrad, RMSprop, LBFGS) and marks no steps itself gets one
// "step" phase per optimizer step(), from the first op after the previous step() to the end of
// the next (interpose/src/optimizer_steps.h); this call, once before the training loop, has the
// first step marked too (without it steps are marked from the second on). tagTraining calls it.
// A branch without libtracerun.
inline void trainingBegins() noexcept {
  if (&tracerun_annotate_training_begins != nullptr) tracerun_annotate_training_begins();
}

// A module's forward (or backward) on this rank: name = module path ("layers.3.attn"), detail =
// module type ("ParallelAttention"), arguments params (count on this rank) and shard (index of
// this rank's shard, -1 when not sharded), plus up to two more of the caller's.
class ModuleScope : public Scope {
 public:
  ModuleScope(const char* path, const char* type, int64_t params, int64_t shard = -1,
              std::initializer_list<Arg> extra = {})
      : ModuleScope(path, type, Packed(params, shard, extra)) {}

 private:
  struct Packed {
    Packed(int64_t params, int64_t shard, std::initializer_list<Arg> extra)
        : args{{vocab::arg::kParams, params},
               {vocab::arg::kShard, shard},
               {nullptr, 0},
               {nullptr, 0}} {
      for (const Arg& a : extra) {
        if (n == kMaxArgs) break;
        args[n++] = a;
      }
    }
    Arg args[kMaxArgs];
    size_t n = 2;
  };
  ModuleScope(const char* path, const char* type, const Packed& p)
      : Scope(ScopeKind::kModule, path, type, p.args, p.n) {}
};

// Tags allocations made by this thread while it lives: tracerun::MemoryTag t(kGradient);
class MemoryTag {
 public:
  explicit MemoryTag(MemoryCategory category) noexcept {
    if (&tracerun_annotate_set_memory_category != nullptr) {
      previous_ = tracerun_annotate_set_memory_category(static_cast<int>(category));
    }
  }
  ~MemoryTag() {
    if (&tracerun_annotate_set_memory_category != nullptr) {
      tracerun_annotate_set_memory_category(previous_);
    }
  }
  MemoryTag(const MemoryTag&) = delete;
  MemoryTag& operator=(const MemoryTag&) = delete;

 private:
  int previous_ = 0;
};

// A sample of a counter ("loss", "tokens_per_s", "lr"); one counter track per name.
inline void counter(const char* name, double value) noexcept {
  if (&tracerun_annotate_counter != nullptr) tracerun_annotate_counter(name, value);
}

}  // namespace tracerun
