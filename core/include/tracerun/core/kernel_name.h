// GPU kernel names as Nsight Systems and Kineto (torch.profiler) show them: the demangled name
// exactly as abi::__cxa_demangle gives it, and nsys' "shortName" (the base function name, for
// tables and graph nodes). Pure functions of the name: no CUDA, no libtorch, no interning or
// caching (the CUPTI translation caches per distinct kernel; readers call these on names they
// show). Does not guess at names that are not Itanium-mangled C++ (extern "C" kernels, NCCL's
// ncclDevKernel_*, cuBLAS' sm80_xmma_*): those are their own demangled and short names.
#pragma once

#include <string>
#include <string_view>

namespace tracerun::core {

// `void at::native::vectorized_elementwise_kernel<4, ...>(int, ...)` for
// `_ZN2at6native29vectorized_elementwise_kernel...`: abi::__cxa_demangle's text. A name that does
// not start with "_Z" or does not demangle is returned as it is (never a type name: "i" stays "i").
std::string demangleKernelName(std::string_view mangled);

// The base function name of a demangled (or plain) name: the return type, the parameter list,
// trailing cv/ref qualifiers, the template arguments (nested <>, () and {} included) and the
// enclosing namespaces/classes ("(anonymous namespace)::" too) removed:
//   void at::native::vectorized_elementwise_kernel<4, F, std::array<char*, 3ul> >(int, F, ...)
//     -> vectorized_elementwise_kernel
//   void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(...::Params) -> Kernel2
//   ncclDevKernel_AllReduce_Sum_f32_RING_LL -> itself
// A call operator keeps its class: `X<int>::operator()(float) const` -> `X::operator()`,
// `f(int)::{lambda(float)#1}::operator()(float) const` -> `{lambda(float)#1}::operator()`.
// A name it cannot parse (unbalanced brackets) is returned whole; never empty for a non-empty name.
std::string kernelShortName(std::string_view demangled);

}  // namespace tracerun::core
