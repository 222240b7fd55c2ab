// The CUDA caching-allocator capture (cuda_alloc_capture.cpp), seen from tests and diagnostics.
#pragma once

namespace tracerun::interpose::cuda {

// Whether allocator events are being recorded now: the tracker is attached and a capture that
// records memory has started it. False where libtorch lacks the tracker (< 2.2).
bool cudaAllocRecording() noexcept;

}  // namespace tracerun::interpose::cuda
