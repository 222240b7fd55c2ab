// RecordRing's allocation (done once, before any record is pushed).
#include "tracerun/core/record_ring.h"

namespace tracerun::core {

namespace {
size_t roundUpPow2(size_t n) {
  size_t p = 2;
  while (p < n) p <<= 1;
  return p;
}
}  // namespace

RecordRing::RecordRing(size_t capacity)
    : capacity_(roundUpPow2(capacity)),
      mask_(capacity_ - 1),
      slots_(std::make_unique<Record[]>(capacity_)) {}

}  // namespace tracerun::core
