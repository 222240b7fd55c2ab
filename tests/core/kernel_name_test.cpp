// Kernel names (core/kernel_name.h) against independent references: the demangled text of real
// kernels from the H100 traces compared with binutils' c++filt (pasted in
// tests/support/kernel_names.h, and run live here when c++filt is on PATH), short names against
// hand-written expectations, and names that must stay as they are (NCCL, cuBLAS, extern "C").
#include "tracerun/core/kernel_name.h"

#include <catch2/catch.hpp>

#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "../support/kernel_names.h"
#include "../support/temp_dir.h"

using tracerun::core::demangleKernelName;
using tracerun::core::kernelShortName;
using tracerun::core::kernelTableLabels;

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

TEST_CASE("table labels tell apart kernels that share a short name") {
  // Twelve kernels of the nanoGPT H100 trace (../shared/gpu-traces) whose short names repeat:
  // four cutlass::Kernel2, six vectorized_elementwise_kernel, two elementwise_kernel; the report's
  // table showed four rows "Kernel2" that nobody could tell apart. Expected labels written by hand.
  const std::vector<std::string> names = {
      "void cutlass::Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>(cutlass_80_simt_s"
      "gemm_256x128_8x4_nt_align1::Params)",
      "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>(cutlass_80_simt_s"
      "gemm_128x256_8x4_nt_align1::Params)",
      "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>(cutlass_80_simt_s"
      "gemm_128x128_8x4_nt_align1::Params)",
      "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(cutlass_80_simt_sg"
      "emm_128x64_8x5_nt_align1::Params)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernel"
      "Impl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() cons"
      "t::{lambda()#2}::operator()() const::{lambda(float, float)#1}, std::array<char*, 3ul"
      "> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native:"
      ":GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lam"
      "bda(float, float)#1}, std::array<char*, 3ul>)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>"
      ", std::array<char*, 3ul> >(int, at::native::CUDAFunctor_add<float>, std::array<char*"
      ", 3ul>)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::GeluCUDAKernelImpl(at:"
      ":TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() const::{lamb"
      "da()#2}::operator()() const::{lambda(float)#1}, std::array<char*, 2ul> >(int, at::na"
      "tive::GeluCUDAKernelImpl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2"
      "}::operator()() const::{lambda()#2}::operator()() const::{lambda(float)#1}, std::arr"
      "ay<char*, 2ul>)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::BinaryFunctor<float, f"
      "loat, float, at::native::binary_internal::MulFunctor<float> >, std::array<char*, 3ul"
      "> >(int, at::native::BinaryFunctor<float, float, float, at::native::binary_internal:"
      ":MulFunctor<float> >, std::array<char*, 3ul>)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<unsigned c"
      "har>, std::array<char*, 1ul> >(int, at::native::FillFunctor<unsigned char>, std::arr"
      "ay<char*, 1ul>)",
      "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, st"
      "d::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
      "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::n"
      "ative::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() "
      "const::{lambda()#7}::operator()() const::{lambda(float)#1}>(at::TensorIteratorBase&,"
      " at::native::direct_copy_kernel_cuda(at::TensorIteratorBase&)::{lambda()#3}::operato"
      "r()() const::{lambda()#7}::operator()() const::{lambda(float)#1} const&)::{lambda(in"
      "t)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native::direct_copy_kernel_cuda(a"
      "t::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::operator()("
      ") const::{lambda(float)#1}>(at::TensorIteratorBase&, at::native::direct_copy_kernel_"
      "cuda(at::TensorIteratorBase&)::{lambda()#3}::operator()() const::{lambda()#7}::opera"
      "tor()() const::{lambda(float)#1} const&)::{lambda(int)#1})",
      "void at::native::elementwise_kernel<128, 2, at::native::gpu_kernel_impl_nocast<at::n"
      "ative::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add"
      "<float> const&)::{lambda(int)#1}>(int, at::native::gpu_kernel_impl_nocast<at::native"
      "::CUDAFunctor_add<float> >(at::TensorIteratorBase&, at::native::CUDAFunctor_add<floa"
      "t> const&)::{lambda(int)#1})"};
  const std::vector<std::string> expected = {
      "Kernel2<cutlass_80_simt_sgemm_256x128_8x4_nt_align1>",
      "Kernel2<cutlass_80_simt_sgemm_128x256_8x4_nt_align1>",
      "Kernel2<cutlass_80_simt_sgemm_128x128_8x4_nt_align1>",
      "Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>",
      "vectorized_elementwise_kernel<GeluBackwardCUDAKernelImpl>",
      "vectorized_elementwise_kernel<CUDAFunctor_add<float>>",
      "vectorized_elementwise_kernel<GeluCUDAKernelImpl>",
      "vectorized_e...<BinaryFunctor<float, float, float, MulFuncto...>",
      "vectorized_elementwise_kernel<FillFunctor<unsigned char>>",
      "vectorized_elementwise_kernel<FillFunctor<float>>",
      // 67 and 66 characters whole: the short name gives up what does not fit.
      "elementwise_...<gpu_kernel_impl_nocast<direct_copy_kernel_cuda>>",
      "elementwise_k...<gpu_kernel_impl_nocast<CUDAFunctor_add<float>>>",
  };
  REQUIRE(names.size() == expected.size());
  const auto labels = kernelTableLabels(names, 64);
  CHECK(labels == expected);
  // At any width: one label per row, none wider, no two alike, each from its short name's start.
  for (size_t width : {16, 24, 40, 64, 200}) {
    INFO("width " << width);
    const auto l = kernelTableLabels(names, width);
    REQUIRE(l.size() == names.size());
    CHECK(std::set<std::string>(l.begin(), l.end()).size() == l.size());
    for (size_t i = 0; i < l.size(); ++i) {
      INFO(l[i]);
      CHECK(l[i].size() <= width);
      CHECK(l[i].compare(0, 7, kernelShortName(names[i]), 0, 7) == 0);
    }
  }
}

TEST_CASE("table labels: a unique short name stays as it is, alike names are numbered") {
  // Kernels that differ only in their parameters have no template argument to show.
  const auto labels = kernelTableLabels(
      {"void k<int>(float*)", "void k<int>(double*)", "void other<float>(int)", "nccl_plain"}, 40);
  CHECK(labels == std::vector<std::string>{"k #1", "k #2", "other", "nccl_plain"});
  // Templates whose differing argument is cut alike are numbered after the cut.
  const auto cut = kernelTableLabels({"void k<aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa1>()",
                                      "void k<aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa2>()"},
                                     24);
  REQUIRE(cut.size() == 2);
  CHECK(cut[0] != cut[1]);
  CHECK(cut[0].size() <= 24);
  CHECK(cut[1].size() <= 24);
}
