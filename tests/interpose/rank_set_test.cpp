// Tests of the rank list (`--ranks`, TRACERUN_RANKS; rank_set.h): parse and print against a
// brute-force expansion of the list, the errors, and libtracerun's configuration, which does not
// start in a rank outside the list. No libtorch, no files.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <random>
#include <set>
#include <string>

#include "capture.h"
#include "tracerun/core/rank_set.h"

using namespace tracerun::interpose;
using tracerun::core::RankSet;

namespace {

// The ranks a list names, by expanding every item (the independent reading of the list).
std::set<int64_t> expand(const std::vector<std::pair<int64_t, int64_t>>& items) {
  std::set<int64_t> out;
  for (const auto& [first, last] : items) {
    for (int64_t r = first; r <= last; ++r) out.insert(r);
  }
  return out;
}

struct Env {
  Env(const char* name, const char* value) : name_(name) {
    if (value != nullptr) {
      ::setenv(name, value, 1);
    } else {
      ::unsetenv(name);
    }
  }
  ~Env() { ::unsetenv(name_); }
  const char* name_;
};

}  // namespace

TEST_CASE("a rank list holds exactly the ranks its items name, and prints them canonically") {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    std::vector<std::pair<int64_t, int64_t>> items;
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 5);
    for (int i = 0; i < n; ++i) {
      const int64_t first = rng() % 40;
      const int64_t last = rng() % 3 == 0 ? first : first + static_cast<int64_t>(rng() % 6);
      items.emplace_back(first, last);
      text += (i ? "," : "") + std::to_string(first) +
              (last != first || rng() % 2 ? "-" + std::to_string(last) : "");
    }
    INFO(text);
    std::string problem;
    const RankSet s = RankSet::parse(text, &problem);
    REQUIRE(problem.empty());
    const std::set<int64_t> truth = expand(items);
    for (int64_t r = 0; r < 50; ++r) CHECK(s.contains(r) == (truth.count(r) == 1));
    CHECK(s.highest() == *truth.rbegin());
    // The canonical text names the same ranks, and is its own canonical text.
    const RankSet again = RankSet::parse(s.text(), &problem);
    REQUIRE(problem.empty());
    for (int64_t r = 0; r < 50; ++r) CHECK(again.contains(r) == s.contains(r));
    CHECK(again.text() == s.text());
  }
  std::string problem;
  CHECK(RankSet::parse("8-15,0,3,1-2", &problem).text() == "0-3,8-15");
  CHECK(RankSet::parse("5,4", &problem).text() == "4,5");
}

TEST_CASE("a malformed rank list says what is wrong") {
  for (const char* bad :
       {"", ",", "1,", "a", "1-", "-3", "3-1", "1--2", "1-2-3", " 1", "+1", "1.5", "99999999999"}) {
    INFO("'" << bad << "'");
    std::string problem;
    const RankSet s = RankSet::parse(bad, &problem);
    CHECK_FALSE(problem.empty());
    CHECK(s.empty());
  }
  std::string problem;
  RankSet::parse("3-1", &problem);
  CHECK(problem == "'3-1' is a range that ends before it starts");
  RankSet::parse("0,x", &problem);
  CHECK(problem == "'x' is not a rank or a range such as 8-15");
}

TEST_CASE("libtracerun does not start in a rank outside TRACERUN_RANKS") {
  const Env output("TRACERUN_OUTPUT", "/tmp/x/rank%r.db");
  const Env ranks("TRACERUN_RANKS", "3,0-1");
  std::string why;
  {
    const Env rank("RANK", "2");
    CHECK_FALSE(configFromEnvironment(&why));
    CHECK(why == "rank 2 is not in TRACERUN_RANKS 3,0-1");
  }
  {
    const Env rank("RANK", "3");
    const auto c = configFromEnvironment(&why);
    REQUIRE(c);
    CHECK(c->traced_ranks == "0,1,3");  // the shard's meta traced_ranks
    CHECK(c->output == "/tmp/x/rank3.db");
  }
  {
    const Env rank("RANK", nullptr);  // rank 0
    CHECK(configFromEnvironment(&why));
  }
  {
    const Env bad("TRACERUN_RANKS", "1-x");  // said, and every rank traced
    const Env rank("RANK", "2");
    const auto c = configFromEnvironment(&why);
    REQUIRE(c);
    CHECK(c->traced_ranks.empty());
  }
}
