// ByteGrad's 8-bit min/max chunk codec (see bytegrad_codec.h). Plain float32 loops, so that the
// Python reference (tests/trainer/bytegrad_reference.py, numpy float32) computes the same bits.
#include "data_parallel/bytegrad_codec.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace gpttrain {
namespace {

float scaleOf(float lo, float hi) {
  return hi > lo ? 255.0f / (hi - lo) : 1.0f;
}

void readHeader(const uint8_t* in, float* lo, float* scale) {
  float hi = 0;
  std::memcpy(lo, in, sizeof(float));
  std::memcpy(&hi, in + sizeof(float), sizeof(float));
  *scale = scaleOf(*lo, hi);
}

}  // namespace

void compressChunk(const float* x, int64_t n, uint8_t* out) {
  float lo = 0, hi = 0;
  if (n > 0) {
    const auto [mn, mx] = std::minmax_element(x, x + n);
    lo = *mn;
    hi = *mx;
  }
  std::memcpy(out, &lo, sizeof(float));
  std::memcpy(out + sizeof(float), &hi, sizeof(float));
  const float scale = scaleOf(lo, hi);
  uint8_t* q = out + kChunkHeader;
  for (int64_t i = 0; i < n; ++i) {
    const float level = std::nearbyint((x[i] - lo) * scale);  // round half to even
    q[i] = static_cast<uint8_t>(std::min(255.0f, std::max(0.0f, level)));
  }
}

void decompressChunk(const uint8_t* in, int64_t n, float* x) {
  float lo = 0, scale = 1;
  readHeader(in, &lo, &scale);
  const uint8_t* q = in + kChunkHeader;
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(q[i]) / scale + lo;
}

void decompressAddChunk(const uint8_t* in, int64_t n, float* acc) {
  float lo = 0, scale = 1;
  readHeader(in, &lo, &scale);
  const uint8_t* q = in + kChunkHeader;
  for (int64_t i = 0; i < n; ++i) acc[i] += static_cast<float>(q[i]) / scale + lo;
}

}  // namespace gpttrain
