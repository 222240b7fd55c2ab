// Kernel names (core/kernel_name.h) against independent references: the demangled text of real
// kernels from the H100 traces compared with binutils' c++filt (pasted in
// tests/support/kernel_names.h, and run live here when c++filt is on PATH), short names against
// hand-written expectations, and names that must stay as they are (NCCL, cuBLAS, extern "C").
#include "tracerun/core/kernel_name.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "../support/kernel_names.h"
#include "../support/temp_dir.h"

using tracerun::core::demangleKernelName;
using tracerun::core::kernelShortName;

TEST_CASE("kernel names from the H100 traces demangle as c++filt prints them") {
  for (const auto& c : tracerun::testing::kKernelNameCases) {
    INFO(c.mangled);
    const std::string d = demangleKernelName(c.mangled);
    CHECK(d == c.demangled);
    CHECK(kernelShortName(d) == c.short_name);
  }
}

TEST_CASE("kernel names demangle as the c++filt on this machine prints them (when installed)") {
  if (std::system("command -v c++filt >/dev/null 2>&1") != 0) {
    WARN("c++filt not installed: only the pasted references were checked");
    return;
  }
  tracerun::testing::TempDir dir("tracerun-kernel-names");
  const std::string in = dir.file("mangled.txt");
  {
    FILE* f = std::fopen(in.c_str(), "w");
    REQUIRE(f != nullptr);
    for (const auto& c : tracerun::testing::kKernelNameCases) std::fprintf(f, "%s\n", c.mangled);
    std::fclose(f);
  }
  FILE* p = ::popen(("c++filt < '" + in + "'").c_str(), "r");
  REQUIRE(p != nullptr);
  std::string all;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, p)) > 0;) all.append(buf, n);
  REQUIRE(::pclose(p) == 0);
  size_t at = 0;
  for (const auto& c : tracerun::testing::kKernelNameCases) {
    const size_t nl = all.find('\n', at);
    REQUIRE(nl != std::string::npos);
    CHECK(demangleKernelName(c.mangled) == all.substr(at, nl - at));
    at = nl + 1;
  }
}

TEST_CASE("names that are not mangled C++ stay as they are") {
  for (const char* name : {
           "ncclDevKernel_AllReduce_Sum_f32_RING_LL",
           "sm80_xmma_gemm_f32f32_f32f32_f32_nn_n_tilesize64x64x8_stage3_warpsize1x4x1_ffma_"
           "aligna4_alignc4_execute_kernel__5x_cublas",
           "triton_poi_fused_add_0",
           "i",    // abi::__cxa_demangle alone would say "int"
           "_Z",   // starts like a mangled name, does not demangle
           "_Zx",  // likewise
           "",
       }) {
    INFO(name);
    CHECK(demangleKernelName(name) == name);
    if (*name != '\0') CHECK(kernelShortName(name) == name);
  }
}

TEST_CASE("short names: return types, templates, parameters, scopes, lambdas, call operators") {
  const std::pair<const char*, const char*> cases[] = {
      {"void foo<int>(int)", "foo"},
      {"unsigned int ns::bar<std::pair<int, long> >(std::vector<int, std::allocator<int> >)",
       "bar"},
      {"void (anonymous namespace)::k<float, 8, true>(float*, float const*)", "k"},
      {"at::native::(anonymous namespace)::plain(int)", "plain"},
      {"simple_kernel(float*, int)", "simple_kernel"},
      {"void ns::Outer<(4>3)>::inner<5>(int)", "inner"},  // a '>' inside an expression
      {"void ns::Functor<float>::operator()(float) const", "Functor::operator()"},
      {"ns::f(int)::{lambda(float, float)#1}::operator()(float, float) const",
       "{lambda(float, float)#1}::operator()"},
      {"void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::"
       "native::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<"
       "float> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::"
       "CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<float> "
       "const&)::{lambda(int)#1})",
       "elementwise_kernel"},
      {"void ns::g<int>(int) &&", "g"},
      {"unbalanced<(", "unbalanced<("},  // cannot parse: whole
  };
  for (const auto& [name, base] : cases) {
    INFO(name);
    CHECK(kernelShortName(name) == base);
  }
}
