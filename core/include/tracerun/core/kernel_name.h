// GPU kernel names as Nsight Systems and Kineto (torch.profiler) show them: the demangled name
// exactly as abi::__cxa_demangle gives it, and nsys' "shortName" (the base function name, for
// tables and graph nodes). Pure functions of the name: no CUDA, no libtorch, no interning or
// caching (the CUPTI translation caches per distinct kernel; readers call these on names they
// show). Does not guess at names that are not Itanium-mangled C++ (extern "C" kernels, NCCL's
// ncclDevKernel_*, cuBLAS' sm80_xmma_*): those are their own demangled and short names.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

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

// Labels for a table of the kernels `demangled` (one per row, same order), each at most `width`
// characters (width >= 16): the short name where no other row shares it; where several do (cuBLAS'
// and CUTLASS' `Kernel2`, ATen's `vectorized_elementwise_kernel`), the short name with the
// template argument that tells those rows apart best (the most distinct values, the earliest on a
// tie), namespaces and function-local types dropped:
//   void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>(...::Params)
//     -> Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>
//   void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, ...>(...)
//     -> vectorized_elementwise_kernel<CUDAFunctor_add<float>>
//   ... at::native::GeluCUDAKernelImpl(at::TensorIteratorBase&, ...)::{lambda(float)#1}, ...
//     -> vectorized_elementwise_kernel<GeluCUDAKernelImpl>
// A label too wide loses the end of the short name first (down to 12 characters:
// "vectorized_e...<BinaryFunctor<...>>"), then the end of the argument. Rows still alike after
// that (names that differ only in their parameters, or past the cut) end in " #1", " #2", ... in
// row order. nsys and torch.profiler tables show the whole demangled name;
// this is for tables too narrow for it, the demangled name staying beside it (JSON, tooltips).
std::vector<std::string> kernelTableLabels(const std::vector<std::string>& demangled, size_t width);

}  // namespace tracerun::core
