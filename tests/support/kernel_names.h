// Real kernel names for tests: mangled names of kernels that ran in the H100 traces of
// ../shared/gpu-traces (nanoGPT on PyTorch 2.11 + CUDA 13), each with the demangled text that
// binutils' c++filt (2.40, Debian 12) printed for it -- an independent demangler, not the code
// under test -- and the base name (nsys' shortName) written by hand. Test-only data.
#pragma once

namespace tracerun::testing {

struct KernelNameCase {
  const char* mangled;
  const char* demangled;  // c++filt's output, pasted
  const char* short_name;
};

inline constexpr KernelNameCase kKernelNameCases[] = {
    {"_Z40fmha_cutlassB_f32_aligned_64x64_k64_sm80N22PyTorchMemEffAttention23AttentionBack"
     "wardKernelIN7cutlass4arch4Sm80EfLb1ELb0ELb0ELi64ELi64ELi64ELb0EE6ParamsE",
     "fmha_cutlassB_f32_aligned_64x64_k64_sm80(PyTorchMemEffAttention::AttentionBackwardKe"
     "rnel<cutlass::arch::Sm80, float, true, false, false, 64, 64, 64, false>::Params)",
     "fmha_cutlassB_f32_aligned_64x64_k64_sm80"},
    {"_ZN14at_cuda_detail3cub6detail4scan16DeviceScanKernelINS2_10policy_hubIllljN2at4cuda"
     "3cub38_GLOBAL__N__5e798be1_6_cub_cu_8a0ccfeb5SumOpIlEEE10Policy1000EPKlPlNS0_13ScanT"
     "ileStateIlLb1EEESA_NS1_10InputValueIlSF_EEjlLb0ElEEvT0_T1_T2_iT3_T4_T5_",
     "void at_cuda_detail::cub::detail::scan::DeviceScanKernel<at_cuda_detail::cub::detail"
     "::scan::policy_hub<long, long, long, unsigned int, at::cuda::cub::(anonymous namespa"
     "ce)::SumOp<long> >::Policy1000, long const*, long*, at_cuda_detail::cub::ScanTileSta"
     "te<long, true>, at::cuda::cub::(anonymous namespace)::SumOp<long>, at_cuda_detail::c"
     "ub::detail::InputValue<long, long*>, unsigned int, long, false, long>(long const*, l"
     "ong*, at_cuda_detail::cub::ScanTileState<long, true>, int, at::cuda::cub::(anonymous"
     " namespace)::SumOp<long>, at_cuda_detail::cub::detail::InputValue<long, long*>, unsi"
     "gned int)",
     "DeviceScanKernel"},
    {"_ZN2at6native13reduce_kernelILi128ELi4ENS0_8ReduceOpIfNS0_14func_wrapper_tIfZNS0_11s"
     "um_functorIfffEclERNS_14TensorIteratorEEUlffE_EEjfLi4ELi4EEEEEvT1_",
     "void at::native::reduce_kernel<128, 4, at::native::ReduceOp<float, at::native::func_"
     "wrapper_t<float, at::native::sum_functor<float, float, float>::operator()(at::Tensor"
     "Iterator&)::{lambda(float, float)#1}>, unsigned int, float, 4, 4> >(at::native::Redu"
     "ceOp<float, at::native::func_wrapper_t<float, at::native::sum_functor<float, float, "
     "float>::operator()(at::TensorIterator&)::{lambda(float, float)#1}>, unsigned int, fl"
     "oat, 4, 4>)",
     "reduce_kernel"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEESt5arrayIPcLm1"
     "EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<4, at::native::FillFunctor<float>, st"
     "d::array<char*, 1ul> >(int, at::native::FillFunctor<float>, std::array<char*, 1ul>)",
     "vectorized_elementwise_kernel"},
    {"_ZN2at6native29vectorized_elementwise_kernelILi4EZZZNS0_26GeluBackwardCUDAKernelImpl"
     "ERNS_18TensorIteratorBaseENS0_8GeluTypeEENKUlvE0_clEvENKUlvE0_clEvEUlffE_St5arrayIPc"
     "Lm3EEEEviT0_T1_",
     "void at::native::vectorized_elementwise_kernel<4, at::native::GeluBackwardCUDAKernel"
     "Impl(at::TensorIteratorBase&, at::native::GeluType)::{lambda()#2}::operator()() cons"
     "t::{lambda()#2}::operator()() const::{lambda(float, float)#1}, std::array<char*, 3ul"
     "> >(int, at::native::GeluBackwardCUDAKernelImpl(at::TensorIteratorBase&, at::native:"
     ":GeluType)::{lambda()#2}::operator()() const::{lambda()#2}::operator()() const::{lam"
     "bda(float, float)#1}, std::array<char*, 3ul>)",
     "vectorized_elementwise_kernel"},
    {"_ZN2at6native53_GLOBAL__N__21739cd4_20_layer_norm_kernel_cu_9c5ada8a39layer_norm_gra"
     "d_input_kernel_vectorizedIffLb0EEEvPKT_S5_PKT0_S8_S5_PS3_i",
     "void at::native::(anonymous namespace)::layer_norm_grad_input_kernel_vectorized<floa"
     "t, float, false>(float const*, float const*, float const*, float const*, float const"
     "*, float*, int)",
     "layer_norm_grad_input_kernel_vectorized"},
    {"_ZN43_GLOBAL__N__b6de9c8c_10_SoftMax_cu_9f978f6321softmax_warp_backwardIfffLi8ELb1EL"
     "b0EEEvPT0_PKT_S5_iiiPKb",
     "void (anonymous namespace)::softmax_warp_backward<float, float, float, 8, true, fals"
     "e>(float*, float const*, float const*, int, int, int, bool const*)",
     "softmax_warp_backward"},
    {"_ZN7cutlass7Kernel2I42cutlass_80_simt_sgemm_128x64_8x5_nt_align1EEvNT_6ParamsE",
     "void cutlass::Kernel2<cutlass_80_simt_sgemm_128x64_8x5_nt_align1>(cutlass_80_simt_sg"
     "emm_128x64_8x5_nt_align1::Params)",
     "Kernel2"},
    {"_ZN8cublasLt19splitKreduce_kernelILi32ELi16EiffffLb0EfffLb1ELb0ELb0ELb0EEEvNS_18cubl"
     "asSplitKParamsIT4_EEPKT2_PKT8_PT7_PT3_PKS2_SF_PKT9_S6_PSG_PvlPS2_PiSL_SL_SF_SF_SF_SF"
     "_SF_",
     "void cublasLt::splitKreduce_kernel<32, 16, int, float, float, float, float, false, f"
     "loat, float, float, true, false, false, false>(cublasLt::cublasSplitKParams<float>, "
     "float const*, float const*, float*, float*, float const*, float const*, float const*"
     ", float const*, float*, void*, long, float*, int*, float*, float*, float const*, flo"
     "at const*, float const*, float const*, float const*)",
     "splitKreduce_kernel"},
};

}  // namespace tracerun::testing
