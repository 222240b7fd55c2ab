// The viewer's visible-range → primitives step (viewer/src/data/lod.h) against brute force on
// random span sets: counts add up, extents cover their members, at most one primitive starts per
// pixel column and depth, wide spans stand alone. No window, no trace file.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "data/lod.h"

using namespace tracerun::viewer;

namespace {

// Nested spans per depth (like a thread) or overlapping ones at one depth (like an async lane).
std::vector<LodSpan> randomSpans(std::mt19937_64& rng, size_t n, bool overlapping) {
  std::vector<LodSpan> out;
  int64_t at = 0;
  int64_t id = 1;
  while (out.size() < n) {
    if (overlapping) {
      const int64_t s = at + static_cast<int64_t>(rng() % 1000);
      out.push_back({id++, s, s + 1 + static_cast<int64_t>(rng() % 50000), 0, 1, 0});
      at = s;
      continue;
    }
    // A root with a few levels of children, durations spread over 6 decades.
    const int64_t dur = static_cast<int64_t>(std::pow(10.0, 1 + (rng() % 6000) / 1000.0));
    std::vector<std::pair<int64_t, int64_t>> level{{at, at + dur}};
    for (int d = 0; d < 4 && out.size() < n; ++d) {
      std::vector<std::pair<int64_t, int64_t>> next;
      for (auto [s, e] : level) {
        out.push_back({id++, s, e, d, static_cast<uint32_t>(rng() % 5), static_cast<uint8_t>(d)});
        int64_t c = s;
        for (int k = 0; k < 3 && e - c > 4; ++k) {
          const int64_t cs =
              c + static_cast<int64_t>(rng() % static_cast<uint64_t>((e - c) / 4 + 1));
          const int64_t ce = std::min<int64_t>(
              e, cs + 1 + static_cast<int64_t>(rng() % static_cast<uint64_t>((e - cs) / 2 + 1)));
          if (ce > cs) next.push_back({cs, ce});
          c = ce;
        }
      }
      level = next;
    }
    at += dur + static_cast<int64_t>(rng() % 2000);
  }
  std::stable_sort(out.begin(), out.end(), [](const LodSpan& a, const LodSpan& b) {
    return a.start != b.start ? a.start < b.start : a.depth < b.depth;
  });
  return out;
}

void checkFold(const std::vector<LodSpan>& spans, const LodWindow& w) {
  const auto prims = foldSpans(spans, w);
  // Brute force: which spans overlap the window, per depth.
  std::map<int, int64_t> expected;
  for (const auto& s : spans)
    if (s.end >= w.t0 && s.start <= w.t1) ++expected[s.depth];
  std::map<int, int64_t> counted;
  std::map<int, int64_t> lastCol;
  const int64_t columns =
      static_cast<int64_t>(std::ceil(static_cast<double>(w.t1 - w.t0) / w.ns_per_px)) + 1;
  std::map<int, int64_t> perDepth;
  for (const auto& p : prims) {
    counted[p.depth] += p.count;
    ++perDepth[p.depth];
    REQUIRE(p.count >= 1);
    REQUIRE(p.dominant < spans.size());
    const LodSpan& dom = spans[p.dominant];
    REQUIRE(dom.depth == p.depth);
    REQUIRE(dom.start >= p.start);
    REQUIRE(dom.end <= p.end);
    REQUIRE(p.fold == (p.count > 1));  // inputs of count 1, none a fold
    if (!p.fold) {
      REQUIRE(dom.start == p.start);
      REQUIRE(dom.end == p.end);
    }
    const int64_t col = columnOf(std::max(p.start, w.t0), w);
    auto it = lastCol.find(p.depth);
    if (it != lastCol.end()) REQUIRE(col > it->second);  // one primitive starts per column
    lastCol[p.depth] = col;
  }
  CHECK(counted == expected);
  for (const auto& kv : perDepth) REQUIRE(kv.second <= columns);
  // Every overlapping span is inside exactly one primitive of its depth (extents nest), and a span
  // at least min_px wide whose start column no other span of its depth shares is drawn alone.
  std::map<std::pair<int, int64_t>, int> startsPerColumn;
  for (const auto& s : spans) {
    if (s.end < w.t0 || s.start > w.t1) continue;
    ++startsPerColumn[{s.depth, columnOf(std::max(s.start, w.t0), w)}];
  }
  for (size_t i = 0; i < spans.size(); ++i) {
    const LodSpan& s = spans[i];
    if (s.end < w.t0 || s.start > w.t1) continue;
    int inside = 0;
    bool alone = false;
    for (const auto& p : prims) {
      if (p.depth != s.depth || s.start < p.start || s.end > p.end) continue;
      ++inside;
      alone = alone || (p.count == 1 && p.dominant == i);
    }
    REQUIRE(inside >= 1);
    const double px =
        static_cast<double>(std::min(s.end, w.t1) - std::max(s.start, w.t0)) / w.ns_per_px;
    if (px >= w.min_px + 1e-6 &&
        startsPerColumn[{s.depth, columnOf(std::max(s.start, w.t0), w)}] == 1) {
      REQUIRE(alone);
    }
  }
}

}  // namespace

TEST_CASE("foldSpans against brute force over zoom levels", "[viewer][lod]") {
  for (uint64_t seed : {1, 2, 3}) {
    for (bool overlapping : {false, true}) {
      std::mt19937_64 rng(seed);
      const auto spans = randomSpans(rng, 3000, overlapping);
      const int64_t end = std::max_element(spans.begin(), spans.end(), [](auto& a, auto& b) {
                            return a.end < b.end;
                          })->end;
      for (double width : {200.0, 1000.0}) {
        // The whole run, a tenth, a hundredth and a window 20 ns wide.
        for (double frac : {1.0, 0.1, 0.01, 1e-6}) {
          LodWindow w;
          const int64_t len =
              std::max<int64_t>(20, static_cast<int64_t>(static_cast<double>(end) * frac));
          w.t0 =
              static_cast<int64_t>(rng() % static_cast<uint64_t>(std::max<int64_t>(1, end - len)));
          if (frac == 1.0) w.t0 = 0;
          w.t1 = w.t0 + len;
          w.ns_per_px = static_cast<double>(len) / width;
          INFO("seed " << seed << " overlapping " << overlapping << " width " << width << " frac "
                       << frac);
          checkFold(spans, w);
        }
      }
    }
  }
}

TEST_CASE("foldSpans folds a dense run into one box and keeps wide spans", "[viewer][lod]") {
  // 1000 spans of 10 ns back to back, then one span of 1000 ns; 10 ns per pixel.
  std::vector<LodSpan> spans;
  for (int i = 0; i < 1000; ++i) spans.push_back({i + 1, i * 10, i * 10 + 9, 0, 0, 0});
  spans.push_back({5000, 20000, 21000, 0, 0, 0});
  LodWindow w{0, 30000, 10.0, 3};
  const auto prims = foldSpans(spans, w);
  REQUIRE(prims.size() == 2);
  CHECK(prims[0].count == 1000);
  CHECK(prims[0].start == 0);
  CHECK(prims[0].end == 9999);
  CHECK(prims[1].count == 1);
  CHECK(spans[prims[1].dominant].id == 5000);
  // At 0.1 ns per pixel the same spans are all wide: none folds, window clipped to the first 20.
  const auto close = foldSpans(spans, LodWindow{0, 195, 0.1, 3});
  CHECK(close.size() == 20);
  for (const auto& p : close) CHECK(p.count == 1);
}

TEST_CASE("the primitives of a 1M-span track stay within the column bound", "[viewer][lod]") {
  std::vector<LodSpan> spans;
  std::mt19937_64 rng(7);
  int64_t at = 0;
  for (int i = 0; i < 1'000'000; ++i) {
    const int64_t d = 1 + static_cast<int64_t>(rng() % 2000);
    spans.push_back({i + 1, at, at + d, 0, 0, 0});
    at += d + static_cast<int64_t>(rng() % 100);
  }
  LodWindow w{0, at, static_cast<double>(at) / 1600, 3};
  const auto prims = foldSpans(spans, w);
  int64_t total = 0;
  for (const auto& p : prims) total += p.count;
  CHECK(total == 1'000'000);
  CHECK(prims.size() <= 1601);
}

TEST_CASE("reduceCounter keeps one column per pixel with the true min and max", "[viewer][lod]") {
  std::mt19937_64 rng(3);
  std::vector<CounterPoint> pts;
  int64_t t = 0;
  for (int i = 0; i < 20000; ++i) {
    t += 1 + static_cast<int64_t>(rng() % 300);
    pts.push_back({t, static_cast<double>(static_cast<int64_t>(rng() % 1000) - 500)});
  }
  for (double npp : {1.0, 37.0, 5000.0}) {
    LodWindow w{t / 3, t / 3 + static_cast<int64_t>(npp * 500), npp, 3};
    const auto cols = reduceCounter(pts, w);
    // Brute force per column.
    std::map<int64_t, std::pair<double, double>> mm;
    std::map<int64_t, double> last;
    for (const auto& p : pts) {
      if (p.ts < w.t0 || p.ts > w.t1) continue;
      const int64_t c = columnOf(p.ts, w);
      auto it = mm.find(c);
      if (it == mm.end()) {
        mm[c] = {p.value, p.value};
      } else {
        it->second.first = std::min(it->second.first, p.value);
        it->second.second = std::max(it->second.second, p.value);
      }
      last[c] = p.value;
    }
    std::set<int64_t> seen;
    for (size_t i = 0; i < cols.size(); ++i) {
      const auto& c = cols[i];
      if (i == 0 && !mm.count(c.column)) continue;  // the carried-in entry value
      REQUIRE(seen.insert(c.column).second);
      REQUIRE(mm.count(c.column));
      CHECK(c.min <= mm[c.column].first);
      CHECK(c.max >= mm[c.column].second);
      CHECK(c.last == last[c.column]);
      // The range may only widen by the value carried in from the previous column.
      const double entry = c.first;
      CHECK(c.min == std::min(mm[c.column].first, entry));
      CHECK(c.max == std::max(mm[c.column].second, entry));
    }
    CHECK(seen.size() == mm.size());
    CHECK(cols.size() <= 502);
  }
}

TEST_CASE("foldSpans keeps the counts and folds of items that already stand for many spans",
          "[viewer][lod]") {
  // Items like trace/'s draw list: a fold of 40 spans, a wide span standing for 3, two items in
  // one pixel column, and a narrow span after a gap.
  std::vector<LodSpan> items = {
      {1, 0, 25, 0, 0, 0, 40, true},     // fold, 2.5 px
      {2, 100, 400, 0, 0, 0, 3, false},  // a span, 30 px, drawn alone
      {3, 500, 509, 0, 0, 0, 1, false},  // these two start in column 50
      {4, 505, 600, 0, 0, 0, 7, false},
      {5, 900, 905, 0, 0, 0, 1, false},  // narrow, alone: not a fold
  };
  const auto prims = foldSpans(items, LodWindow{0, 1000, 10.0, 3});
  REQUIRE(prims.size() == 4);
  CHECK(prims[0].count == 40);
  CHECK(prims[0].fold);
  CHECK(prims[1].count == 3);
  CHECK(!prims[1].fold);
  CHECK(prims[2].count == 8);
  CHECK(prims[2].fold);
  CHECK(items[prims[2].dominant].id == 4);  // the longer of the two
  CHECK(prims[3].count == 1);
  CHECK(!prims[3].fold);
}
