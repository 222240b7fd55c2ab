// Every difference between the libtorch versions we build against (Debian's 1.13.1 and official
// 2.x) lives here, behind small names. Include it before using the APIs it covers. Nothing else.
//
// Sections: build guard · version macros · c10d (opt-in) · CPU autocast · RecordFunction and the
//           CPU allocator · CUDA autocast and the device-generic autocast guard
#pragma once

// Debian's libtorch was built with NDEBUG, and at::RecordFunction has an #ifndef NDEBUG member:
// code built without it reads shifted fields. cmake/TracerunTorch.cmake always defines it.
#ifndef NDEBUG
#error "tracerun's libtorch targets must be compiled with -DNDEBUG (see cmake/TracerunTorch.cmake)"
#endif

#include <torch/version.h>

#define TRACERUN_TORCH_VERSION_AT_LEAST(major, minor) \
  (TORCH_VERSION_MAJOR > (major) ||                   \
   (TORCH_VERSION_MAJOR == (major) && TORCH_VERSION_MINOR >= (minor)))

namespace tracerun::compat {

inline constexpr int kTorchMajor = TORCH_VERSION_MAJOR;
inline constexpr int kTorchMinor = TORCH_VERSION_MINOR;

}  // namespace tracerun::compat

// ---------------------------------------------------------------------------------------------
// The autograd engine's evaluate_function, which libtracerun interposes to learn which Node a
// backward RecordFunction belongs to (interpose/src/autograd_engine.cpp). Private libtorch API:
// its signature and Itanium mangling are checked for 1.13 only. Elsewhere nothing is interposed,
// backward spans carry no graph edges, and `tracedot autograd` says so in one line.
// ---------------------------------------------------------------------------------------------
#if TORCH_VERSION_MAJOR == 1 && TORCH_VERSION_MINOR == 13
#define TRACERUN_INTERPOSE_AUTOGRAD_ENGINE 1
namespace tracerun::compat {
inline constexpr const char* kEngineEvaluateFunctionSymbol =
    "_ZN5torch8autograd6Engine17evaluate_functionERSt10shared_ptrINS0_9GraphTaskEEPNS0_4NodeERNS0_"
    "11InputBufferERKS2_INS0_10ReadyQueueEE";
}  // namespace tracerun::compat
#else
#define TRACERUN_INTERPOSE_AUTOGRAD_ENGINE 0
#endif

// ---------------------------------------------------------------------------------------------
// c10d (process groups). Opt-in: define TRACERUN_COMPAT_C10D before the FIRST inclusion of this
// header in a translation unit (#pragma once skips later ones), so that code without collectives
// does not pay for the c10d headers.
//
// 1.13: ProcessGroupGloo/NCCL derive from c10d::ProcessGroup, which holds the collectives.
// 2.x:  they derive from c10d::Backend (same collective signatures); c10d::ProcessGroup became a
//       dispatching front. We hold the concrete backend, so the type we call is CollectiveGroup.
// Gloo in 1.13 throws on reduce_scatter, _reduce_scatter_base, _allgather_base and vector
// alltoall; callers choose fallbacks by getBackendName() (see trainer/parallel/collectives.h).
// ---------------------------------------------------------------------------------------------
#if defined(TRACERUN_COMPAT_C10D) && !defined(TRACERUN_COMPAT_C10D_DONE)
#define TRACERUN_COMPAT_C10D_DONE

#include <chrono>
#include <string>

#include <torch/csrc/distributed/c10d/PrefixStore.hpp>
#include <torch/csrc/distributed/c10d/ProcessGroupGloo.hpp>
#include <torch/csrc/distributed/c10d/TCPStore.hpp>

namespace tracerun::compat {

#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 0)
using CollectiveGroup = c10d::Backend;
#else
using CollectiveGroup = c10d::ProcessGroup;
#endif
using CollectiveGroupPtr = c10::intrusive_ptr<CollectiveGroup>;

// A Gloo group of `size` ranks over `store` (give each sub-group its own c10d::PrefixStore),
// bound to `hostname` ("127.0.0.1" for single-host jobs; empty: this machine's hostname).
inline CollectiveGroupPtr makeGlooGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                        int size, const std::string& hostname,
                                        std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupGloo::Options::create(timeout);
  options->devices.push_back(hostname.empty()
                                 ? c10d::ProcessGroupGloo::createDefaultDevice()
                                 : c10d::ProcessGroupGloo::createDeviceForHostname(hostname));
  return c10::make_intrusive<c10d::ProcessGroupGloo>(store, rank, size, options);
}

}  // namespace tracerun::compat

// ProcessGroupNCCL, only where the build found a libtorch with CUDA and c10d NCCL
// (TRACERUN_TORCH_HAS_NCCL, set by trainer/CMakeLists.txt from cmake/TracerunOptions.cmake). The
// constructor (store, rank, size, intrusive_ptr<Options>) and Options::create(bool
// is_high_priority_stream) are the same in 1.13 and 2.x; the timeout is a field of the options'
// base (ProcessGroup::Options in 1.13, Backend::Options in 2.x). Checked here only by a
// syntax-only compile against 1.13 + CUDA headers (docs/trainer.md); never linked or run.
#if defined(TRACERUN_TORCH_HAS_NCCL)
#include <torch/csrc/distributed/c10d/ProcessGroupNCCL.hpp>

namespace tracerun::compat {

// An NCCL group of `size` ranks over `store` (a PrefixStore per sub-group, as for Gloo). It creates
// no communicator yet: NCCL does that at the first collective, on the device of its tensors.
inline CollectiveGroupPtr makeNcclGroup(const c10::intrusive_ptr<c10d::Store>& store, int rank,
                                        int size, std::chrono::milliseconds timeout) {
  auto options = c10d::ProcessGroupNCCL::Options::create();
  options->timeout = timeout;
  return c10::make_intrusive<c10d::ProcessGroupNCCL>(store, rank, size, options);
}

}  // namespace tracerun::compat
#endif  // TRACERUN_TORCH_HAS_NCCL

// Coalescing changed shape: 1.13 and 2.0 have `void startCoalescing()` and
// `void endCoalescing(std::vector<intrusive_ptr<Work>>&)`; 2.1+ Backend has `void
// startCoalescing()` and `intrusive_ptr<Work> endCoalescing()`. A decorator
// (tracerun/traced_group.h) writes TRACERUN_C10D_FORWARD_COALESCING(inner_) in its class body to
// forward both to `inner_`.
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 1)
#define TRACERUN_C10D_FORWARD_COALESCING(inner)             \
  void startCoalescing() override {                         \
    (inner)->startCoalescing();                             \
  }                                                         \
  c10::intrusive_ptr<c10d::Work> endCoalescing() override { \
    return (inner)->endCoalescing();                        \
  }
#else
#define TRACERUN_C10D_FORWARD_COALESCING(inner)                                    \
  void startCoalescing() override {                                                \
    (inner)->startCoalescing();                                                    \
  }                                                                                \
  void endCoalescing(std::vector<c10::intrusive_ptr<c10d::Work>>& reqs) override { \
    (inner)->endCoalescing(reqs);                                                  \
  }
#endif

#endif  // TRACERUN_COMPAT_C10D

// ---------------------------------------------------------------------------------------------
// Autocast, CPU and CUDA (gpttrain --bf16, on --device cpu or cuda). 1.13-2.3: CPU autocast is
// at::autocast::set_cpu_enabled / is_cpu_enabled / set_autocast_cpu_dtype / get_autocast_cpu_dtype,
// CUDA's the plain and "gpu" names (set_enabled, is_enabled, set_autocast_gpu_dtype...). 2.4+: the
// same state behind set_autocast_enabled(device, ...) / set_autocast_dtype(device, ...) (the old
// names are deprecated there). All live in libtorch_cpu, so this compiles and links against a
// CPU-only libtorch too. Checked on this machine against 1.13 only (the CUDA state never used at
// run time; the 2.4+ branch has not been compiled).
// ---------------------------------------------------------------------------------------------
#if !defined(TRACERUN_COMPAT_AUTOCAST_DONE)
#define TRACERUN_COMPAT_AUTOCAST_DONE

#include <ATen/autocast_mode.h>
#include <c10/core/DeviceType.h>

namespace tracerun::compat {

namespace autocast_detail {
inline bool enabled(c10::DeviceType device) {
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 4)
  return at::autocast::is_autocast_enabled(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::is_enabled()
                                         : at::autocast::is_cpu_enabled();
#endif
}
inline at::ScalarType dtype(c10::DeviceType device) {
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 4)
  return at::autocast::get_autocast_dtype(device);
#else
  return device == c10::DeviceType::CUDA ? at::autocast::get_autocast_gpu_dtype()
                                         : at::autocast::get_autocast_cpu_dtype();
#endif
}
inline void set(c10::DeviceType device, bool on, at::ScalarType dtype) {
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 4)
  at::autocast::set_autocast_enabled(device, on);
  at::autocast::set_autocast_dtype(device, dtype);
#else
  if (device == c10::DeviceType::CUDA) {
    at::autocast::set_enabled(on);
    at::autocast::set_autocast_gpu_dtype(dtype);
  } else {
    at::autocast::set_cpu_enabled(on);
    at::autocast::set_autocast_cpu_dtype(dtype);
  }
#endif
}
}  // namespace autocast_detail

// While alive, ops on this thread run under autocast to `dtype` (bf16 on CPU) for tensors on
// `device`: CUDA autocast on CUDA, CPU autocast otherwise (the meta device included: nothing is
// cast there that matters). Nests; the cast cache is cleared when the outermost guard ends. Same
// thread for constructor and destructor.
class AutocastGuard {
 public:
  AutocastGuard(c10::DeviceType device, at::ScalarType dtype)
      : device_(device == c10::DeviceType::CUDA ? c10::DeviceType::CUDA : c10::DeviceType::CPU),
        was_enabled_(autocast_detail::enabled(device_)),
        previous_dtype_(autocast_detail::dtype(device_)) {
    autocast_detail::set(device_, true, dtype);
    at::autocast::increment_nesting();
  }
  ~AutocastGuard() {
    if (at::autocast::decrement_nesting() == 0) at::autocast::clear_cache();
    autocast_detail::set(device_, was_enabled_, previous_dtype_);
  }
  AutocastGuard(const AutocastGuard&) = delete;
  AutocastGuard& operator=(const AutocastGuard&) = delete;

 private:
  c10::DeviceType device_;
  bool was_enabled_;
  at::ScalarType previous_dtype_;
};

}  // namespace tracerun::compat

#endif  // TRACERUN_COMPAT_AUTOCAST

// ---------------------------------------------------------------------------------------------
// RecordFunction and the CPU allocator (libtracerun; interpose/src/*_capture.cpp).
//
// RecordFunction: what capture and annotate.h use -- at::addGlobalCallback, RecordFunctionCallback
// ::needsInputs/::scopes, name(), inputs() (start callback only), seqNr(), forwardThreadId(),
// threadId(), isAsync(), at::getStepCallbacksUnlessEmpty, RecordFunction(StepCallbacks&&),
// before(const char*) -- has the same signatures in 1.13 and 2.x. Remember the NDEBUG guard
// above: inputs() and seqNr() are inline reads of a layout that depends on it.
//
// c10::Allocator: 1.13 declares `DataPtr allocate(size_t) const`; 2.3+ `DataPtr allocate(size_t)`
// (not const) plus a pure virtual `copy_data(dest, src, count) const`. A wrapping allocator
// writes `DataPtr allocate(size_t n) TRACERUN_ALLOCATE_CONST override` and defines copy_data when
// TRACERUN_ALLOCATOR_HAS_COPY_DATA. (Only 1.13 is built on this machine.)
// ---------------------------------------------------------------------------------------------
#if !defined(TRACERUN_COMPAT_ALLOCATOR_DONE)
#define TRACERUN_COMPAT_ALLOCATOR_DONE
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 3)
#define TRACERUN_ALLOCATE_CONST
#define TRACERUN_ALLOCATOR_HAS_COPY_DATA 1
#else
#define TRACERUN_ALLOCATE_CONST const
#define TRACERUN_ALLOCATOR_HAS_COPY_DATA 0
#endif
#endif  // TRACERUN_COMPAT_ALLOCATOR

// ---------------------------------------------------------------------------------------------
// CUDA caching-allocator events (interpose/cuda/cuda_alloc_capture.cpp). Opt-in like c10d: define
// TRACERUN_COMPAT_CUDA_ALLOC before the FIRST inclusion of this header, and only in code built
// where libtorch has CUDA (TRACERUN_WITH_TORCH_CUDA, cmake/TracerunOptions.cmake).
//
// The trace tracker, c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(
// AllocatorTraceTracker = std::function<void(const TraceEntry&)>), came with pytorch PR #112238
// (October 2023, after 2.1.0 shipped): libtorch 2.2+. 1.13 has no TraceEntry at all; 2.0 and 2.1
// record TraceEntries only into recordHistory's ring buffer (no callback, no timestamps).
// TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER says which.
//
// TraceEntry changed between releases (2.2: device_ int, addr_ int64_t, no time; 2.3+: device_
// c10::DeviceIndex, time_; later size_t addr_/size_, mempool_, compile_context_; newest releases
// define it in c10/core/CachingDeviceAllocator.h), so CudaTraceEntry is taken from the tracker's
// own signature and only action_, device_, addr_ and size_ are read, each through a cast. The
// tracker is attached to the device allocators that exist: 2.2 silently attaches to none before
// CUDA is initialised, 2.3+ asserts (PR #119862), hence lazyInitCuda() first: 2.2-2.5
// Context::lazyInitCUDA(), 2.6+ lazyInitDevice(at::kCUDA) (lazyInitCUDA warns there). There is no
// way to detach a tracker. Checked only by reading the 2.2+ headers and sources: this machine's
// libtorch (1.13, CPU) compiles none of it.
// ---------------------------------------------------------------------------------------------
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 2)
#define TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER 1
#else
#define TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER 0
#endif

#if defined(TRACERUN_COMPAT_CUDA_ALLOC) && !defined(TRACERUN_COMPAT_CUDA_ALLOC_DONE) && \
    TRACERUN_TORCH_HAS_ALLOC_TRACE_TRACKER
#define TRACERUN_COMPAT_CUDA_ALLOC_DONE

#include <ATen/Context.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <functional>
#include <type_traits>

namespace tracerun::compat {

namespace detail {
template <typename F>
struct TrackerArgument;
template <typename R, typename A>
struct TrackerArgument<std::function<R(A)>> {
  using type = std::remove_cv_t<std::remove_reference_t<A>>;
};
}  // namespace detail

using CudaTraceEntry =
    typename detail::TrackerArgument<c10::cuda::CUDACachingAllocator::AllocatorTraceTracker>::type;

// Initialises libtorch's CUDA state once per process (a no-op after the program did; waits while
// another thread does it). Throws c10::Error when there is no usable device.
inline void lazyInitCuda() {
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 6)
  at::globalContext().lazyInitDevice(at::kCUDA);
#else
  at::globalContext().lazyInitCUDA();
#endif
}

// Calls fn for every allocator event of every device from now on, on the allocating (or freeing)
// thread, while that device's allocator mutex is held. Call after lazyInitCuda().
inline void attachCudaAllocTracker(void (*fn)(const CudaTraceEntry&)) {
  c10::cuda::CUDACachingAllocator::attachAllocatorTraceTracker(fn);
}

inline int cudaDeviceCount() {
  return static_cast<int>(c10::cuda::device_count());
}

// What the allocator holds for `device` now: reserved (segment) bytes and live requested bytes.
inline void cudaAllocatorBytes(int device, int64_t* reserved, int64_t* requested) {
  const auto stats =
      c10::cuda::CUDACachingAllocator::getDeviceStats(static_cast<c10::DeviceIndex>(device));
  // StatType::AGGREGATE, the first entry of every stat array. The enum moved from
  // c10::cuda::CUDACachingAllocator to c10::CachingDeviceAllocator (c10/core/
  // CachingDeviceAllocator.h) in 2.x; its value has stayed 0, so no version test is needed.
  constexpr size_t all = 0;
  *reserved = stats.reserved_bytes[all].current;
  *requested = stats.requested_bytes[all].current;
}

}  // namespace tracerun::compat

#endif  // TRACERUN_COMPAT_CUDA_ALLOC

// ---------------------------------------------------------------------------------------------
// Multi-tensor (foreach) norms. _foreach_norm computes in the tensors' own dtype before libtorch
// 2.4 (a bf16 list's norms rounded to bf16); 2.4 added its dtype argument. foreachNormsFloat gives
// each tensor's L2 norm as fp32 in one multi-tensor call where this libtorch can, else nullopt
// (the caller then takes its per-tensor path). The 2.4+ branch is compiled on the GPU machine only.
// ---------------------------------------------------------------------------------------------
#if !defined(TRACERUN_COMPAT_FOREACH_DONE)
#define TRACERUN_COMPAT_FOREACH_DONE

#include <ATen/ATen.h>

#include <algorithm>
#include <optional>
#include <vector>

namespace tracerun::compat {

inline std::optional<std::vector<at::Tensor>> foreachNormsFloat(at::TensorList tensors) {
  const bool all_float = std::all_of(tensors.begin(), tensors.end(), [](const at::Tensor& t) {
    return t.scalar_type() == at::kFloat;
  });
  if (all_float) return at::_foreach_norm(tensors);
#if TRACERUN_TORCH_VERSION_AT_LEAST(2, 4)
  return at::_foreach_norm(tensors, 2, at::kFloat);
#else
  return std::nullopt;
#endif
}

}  // namespace tracerun::compat

#endif  // TRACERUN_COMPAT_FOREACH_DONE
