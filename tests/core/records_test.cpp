// The event model's records: sizes, round trips through a slot, enum names.
#include <catch2/catch.hpp>

#include "tracerun/core/records.h"
#include "tracerun/core/tracks.h"

using namespace tracerun::core;

TEST_CASE("every record kind fills exactly one 64-byte slot and survives a round trip") {
  SpanRecord s;
  s.name = 7;
  s.start_ns = 100;
  s.end_ns = 250;
  s.id = 42;
  s.parent = 41;
  s.depth = 3;
  s.seq = 9;
  s.category = Category::kBackward;
  const Record slot = Record::from(s);
  REQUIRE(slot.kind() == RecordKind::kSpan);
  const auto back = slot.as<SpanRecord>();
  CHECK(back.name == 7);
  CHECK(back.start_ns == 100);
  CHECK(back.end_ns == 250);
  CHECK(back.id == 42);
  CHECK(back.parent == 41);
  CHECK(back.depth == 3);
  CHECK(back.seq == 9);
  CHECK(back.category == Category::kBackward);

  CHECK(Record::from(ArgsRecord{}).kind() == RecordKind::kArgs);
  CHECK(Record::from(InstantRecord{}).kind() == RecordKind::kInstant);
  CHECK(Record::from(CounterRecord{}).kind() == RecordKind::kCounter);
  CHECK(Record::from(MemoryRecord{}).kind() == RecordKind::kMemory);
  CHECK(Record::from(FlowRecord{}).kind() == RecordKind::kFlow);
}

TEST_CASE("memory records carry signed sizes and the running total") {
  MemoryRecord m;
  m.bytes = -4096;
  m.total = 8192;
  m.ptr = 0xdeadbeef;
  m.category = MemoryCategory::kGradient;
  const auto back = Record::from(m).as<MemoryRecord>();
  CHECK(back.bytes == -4096);
  CHECK(back.total == 8192);
  CHECK(back.ptr == 0xdeadbeef);
  CHECK(back.category == MemoryCategory::kGradient);
}

TEST_CASE("enum names are distinct and stable") {
  CHECK(std::string(categoryName(Category::kOp)) == "op");
  CHECK(std::string(categoryName(Category::kComm)) == "comm");
  CHECK(std::string(memoryCategoryName(MemoryCategory::kOptimizerState)) == "optimizer_state");
  CHECK(std::string(flowKindName(FlowKind::kForwardBackward)) == "forward_backward");
  CHECK(std::string(trackKindName(TrackKind::kCounter)) == "counter");
  for (int a = 0; a < int(Category::kCount); ++a)
    for (int b = a + 1; b < int(Category::kCount); ++b)
      CHECK(std::string(categoryName(Category(a))) != categoryName(Category(b)));
}

// The numbers are stored in traces and cross the annotation ABI: input came after other (7), so
// a trace written before it keeps its categories.
TEST_CASE("memory categories: input is 7, named input, and every name is distinct") {
  CHECK(std::string(memoryCategoryName(MemoryCategory::kInput)) == "input");
  CHECK(static_cast<int>(MemoryCategory::kOther) == 6);
  CHECK(static_cast<int>(MemoryCategory::kInput) == 7);
  CHECK(static_cast<int>(MemoryCategory::kCount) == 8);
  CHECK(std::string(memoryCategoryName(MemoryCategory::kCount)) == "unknown");
  for (int a = 0; a < int(MemoryCategory::kCount); ++a) {
    for (int b = a + 1; b < int(MemoryCategory::kCount); ++b) {
      CHECK(std::string(memoryCategoryName(MemoryCategory(a))) !=
            memoryCategoryName(MemoryCategory(b)));
    }
  }
}
