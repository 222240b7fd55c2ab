// Every difference between the libtorch versions we build against (Debian's 1.13.1 and official
// 2.x) lives here, behind small names. Include it before using the APIs it covers. Nothing else.
//
// Sections: build guard · version macros · c10d (added as needed) · RecordFunction (as needed)
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
