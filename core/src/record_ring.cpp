// RecordRing's allocation (done once, before any record is pushed).
#include "tracerun/core/record_ring.h"

#include <type_traits>

namespace tracerun::core {

namespace {
size_t roundUpPow2(size_t n) {
  size_t p = 2;
  while (p < n) p <<= 1;
  return p;
}
}  // namespace

// kOnFirstUse relies on new[] leaving the slots untouched: a default member initializer in Record
// would write every slot and make every ring resident again.
static_assert(std::is_trivially_default_constructible_v<Record>);

RecordRing::RecordRing(size_t capacity, Pages pages)
    : capacity_(roundUpPow2(capacity)),
      mask_(capacity_ - 1),
      // make_unique value-initializes (zeroes, so touches) every slot; a plain new[] leaves a
      // large block's fresh pages unmapped until written.
      slots_(pages == Pages::kResident ? std::make_unique<Record[]>(capacity_)
                                       : std::unique_ptr<Record[]>(new Record[capacity_])) {}

}  // namespace tracerun::core
