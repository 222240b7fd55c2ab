// Printable names of the record enums; the trace store writes these into lookup tables.
#include "tracerun/core/records.h"

namespace tracerun::core {

const char* categoryName(Category c) noexcept {
  switch (c) {
    case Category::kOp: return "op";
    case Category::kBackward: return "backward";
    case Category::kUser: return "user";
    case Category::kModule: return "module";
    case Category::kComm: return "comm";
    case Category::kPhase: return "phase";
    case Category::kKernel: return "kernel";
    case Category::kMemcpy: return "memcpy";
    case Category::kOther: return "other";
    case Category::kCount: break;
  }
  return "unknown";
}

const char* memoryCategoryName(MemoryCategory c) noexcept {
  switch (c) {
    case MemoryCategory::kUnknown: return "unknown";
    case MemoryCategory::kParameter: return "parameter";
    case MemoryCategory::kGradient: return "gradient";
    case MemoryCategory::kOptimizerState: return "optimizer_state";
    case MemoryCategory::kActivation: return "activation";
    case MemoryCategory::kTemporary: return "temporary";
    case MemoryCategory::kOther: return "other";
    case MemoryCategory::kInput: return "input";
    case MemoryCategory::kCount: break;
  }
  return "unknown";
}

const char* flowKindName(FlowKind k) noexcept {
  switch (k) {
    case FlowKind::kForwardBackward: return "forward_backward";
    case FlowKind::kSendRecv: return "send_recv";
    case FlowKind::kOpKernel: return "op_kernel";
    case FlowKind::kOther: return "other";
    case FlowKind::kCount: break;
  }
  return "unknown";
}

}  // namespace tracerun::core
