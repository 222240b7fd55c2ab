// How a program names the dtype of a memory category in a trace (allocations carry bytes, not
// dtypes): an empty user scope "memory_dtype:<category>=<dtype>". Not a vocabulary of dtypes.
#pragma once

namespace tracerun::vocab::scope {

// gpttrain names parameter, gradient and optimizer_state; `tracerun report` shows them.
inline constexpr char kMemoryDtypePrefix[] = "memory_dtype:";

}  // namespace tracerun::vocab::scope
