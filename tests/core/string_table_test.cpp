// StringTable: dense ids, deduplication, concurrent interning.
#include <catch2/catch.hpp>

#include <thread>
#include <vector>

#include "tracerun/core/string_table.h"

using namespace tracerun::core;

TEST_CASE("interning gives dense, stable ids, 0 is the empty string") {
  StringTable t;
  CHECK(t.intern("") == 0);
  const auto a = t.intern("aten::addmm");
  const auto b = t.intern("aten::mm");
  CHECK(a == 1);
  CHECK(b == 2);
  CHECK(t.intern("aten::addmm") == a);
  CHECK(t.get(a) == "aten::addmm");
  CHECK(t.get(999).empty());
  CHECK(t.since(1) == std::vector<std::string>{"aten::addmm", "aten::mm"});
}

TEST_CASE("concurrent interning of overlapping names agrees on ids") {
  StringTable t;
  std::vector<std::thread> threads;
  std::vector<std::vector<StringId>> got(4);
  for (int k = 0; k < 4; ++k) {
    threads.emplace_back([&, k] {
      for (int i = 0; i < 1000; ++i) got[size_t(k)].push_back(t.intern("name" + std::to_string(i)));
    });
  }
  for (auto& th : threads) th.join();
  CHECK(t.size() == 1001);
  for (int k = 1; k < 4; ++k) CHECK(got[size_t(k)] == got[0]);
}
