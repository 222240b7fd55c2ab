// ByteGrad's compressor (Bagua's MinMax-UInt8): a float chunk becomes one byte per element plus
// its min and max, and back. One chunk at a time, on host memory; it does not split buckets or
// communicate (dp_bytegrad.cpp does).
//
// The wire format of one chunk of n elements (kChunkHeader + n bytes): float min, float max (native
// byte order), then q[i] = clamp(round_half_even((x[i] - min) * scale), 0, 255) with
// scale = 255 / (max - min) (1 when max == min), all in float32. Decompression gives
// q[i] / scale + min. tests/trainer/bytegrad_reference.py computes the same from this text.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gpttrain {

inline constexpr int64_t kChunkHeader = 2 * sizeof(float);

// Bytes one chunk of n elements takes on the wire.
inline int64_t compressedChunkBytes(int64_t n) {
  return kChunkHeader + n;
}

// Writes x[0..n) compressed into out[0..compressedChunkBytes(n)).
void compressChunk(const float* x, int64_t n, uint8_t* out);
// Reads a chunk written by compressChunk into x[0..n).
void decompressChunk(const uint8_t* in, int64_t n, float* x);
// Adds the decompressed chunk into acc[0..n) (acc[i] += q[i] / scale + min).
void decompressAddChunk(const uint8_t* in, int64_t n, float* acc);

}  // namespace gpttrain
