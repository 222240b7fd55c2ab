// The differences of two runs' per-name totals (see compare.h). The totals are the report's own
// (report.h's opTotals), so the compare view and `tracerun report` cannot disagree.
#include "tracerun/trace/analysis/compare.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "span_select.h"

namespace tracerun::trace::analysis {

double NameDiff::ratio() const {
  if (a.total_ns == b.total_ns) return 1.0;
  if (a.total_ns == 0) return std::numeric_limits<double>::infinity();
  return static_cast<double>(b.total_ns) / static_cast<double>(a.total_ns);
}

RunComparison compareTotals(const std::vector<OpRow>& a, const std::vector<OpRow>& b) {
  std::map<std::pair<std::string, int>, NameDiff> byName;
  auto at = [&](const OpRow& r) -> NameDiff& {
    NameDiff& d = byName[{r.name, static_cast<int>(r.category)}];
    d.name = r.name;
    d.category = r.category;
    return d;
  };
  for (const OpRow& r : a) at(r).a = r;
  for (const OpRow& r : b) at(r).b = r;
  RunComparison out;
  out.rows.reserve(byName.size());
  for (auto& kv : byName) out.rows.push_back(std::move(kv.second));
  // |B - A| as unsigned, so that the difference of two saturated totals never overflows.
  auto absDiff = [](const NameDiff& d) {
    const int64_t x = d.a.total_ns, y = d.b.total_ns;
    return x > y ? static_cast<uint64_t>(x) - static_cast<uint64_t>(y)
                 : static_cast<uint64_t>(y) - static_cast<uint64_t>(x);
  };
  std::stable_sort(out.rows.begin(), out.rows.end(), [&](const NameDiff& x, const NameDiff& y) {
    const uint64_t dx = absDiff(x), dy = absDiff(y);
    if (dx != dy) return dx > dy;
    const int64_t mx = std::max(x.a.total_ns, x.b.total_ns),
                  my = std::max(y.a.total_ns, y.b.total_ns);
    return mx > my;  // ties keep name order (the map's)
  });
  return out;
}

RunComparison compareRuns(const TraceReader& a, const TraceReader& b) {
  return compareTotals(opTotals(a), opTotals(b));
}

}  // namespace tracerun::trace::analysis
