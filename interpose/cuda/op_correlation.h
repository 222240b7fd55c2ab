// Op -> device work correlation for CUPTI: while CUDA capture runs, every ATen op pushes the
// external correlation id of its own span (cupti_translate.h: opExternalId) when it starts and pops
// it when it ends, so CUPTI tags each kernel/copy launched inside the op with it. A separate
// RecordFunction callback registered only when CUPTI started: the default hot path is unchanged.
#pragma once

#include <cupti_activity.h>

#include <cstdint>

namespace tracerun::interpose::cuda {

// cuptiActivityPushExternalCorrelationId / Pop, or stand-ins in tests.
using PushExternalIdFn = CUptiResult (*)(CUpti_ExternalCorrelationKind, uint64_t);
using PopExternalIdFn = CUptiResult (*)(CUpti_ExternalCorrelationKind, uint64_t*);

// Registers the callback (FUNCTION scope: dispatcher ops). It must run after op capture's start
// callback, which opens the frame it reads: call this after op capture started (RecordFunction
// runs global callbacks in the order they were added). Ids are relative to baseNs. An op whose
// frame is not the innermost open one (stack overflow, not captured) pushes 0: its device work
// gets no flow. Returns false if already started.
bool startOpCorrelation(PushExternalIdFn push, PopExternalIdFn pop, int64_t baseNs);
// Removes the callback; ops still running pop with the same functions.
void stopOpCorrelation();
// Ops that pushed 0 since startOpCorrelation (no frame of theirs on top of the stack: not
// captured, too deep, or the callbacks ran in the wrong order): their device work has no flow.
uint64_t uncorrelatedOps() noexcept;

}  // namespace tracerun::interpose::cuda
