// Span picking, argument lookup and interval arithmetic for the analyses (see span_select.h).
#include "span_select.h"

#include <algorithm>

namespace tracerun::trace::analysis {

NameCodes::NameCodes(const TraceReader& reader, std::function<int(const std::string&)> classify)
    : reader_(reader), classify_(std::move(classify)), codes_(reader.stringCount(), -1) {}

int NameCodes::operator()(core::StringId id) const {
  if (id >= codes_.size()) return classify_(reader_.str(id));
  int8_t& c = codes_[id];
  if (c < 0) c = static_cast<int8_t>(classify_(reader_.str(id)));
  return c;
}

core::StringId NameCodes::find(const TraceReader& reader, const std::string& text) {
  const size_t n = reader.stringCount();
  for (size_t i = 1; i < n; ++i) {
    if (reader.str(static_cast<core::StringId>(i)) == text) return static_cast<core::StringId>(i);
  }
  return 0;
}

int64_t PickedSpan::arg(core::StringId key, int64_t fallback) const {
  if (key == 0) return fallback;
  for (const auto& [k, v] : args) {
    if (k == key) return v;
  }
  return fallback;
}

std::vector<PickedSpan> pickSpans(const TraceReader& reader, const TrackRow& track,
                                  const std::function<int(const SpanRow&)>& keep) {
  std::vector<PickedSpan> out;
  reader.forEachSpan(track.id, [&](const SpanRow& s) {
    const int code = keep(s);
    if (code == 0) return;
    PickedSpan p;
    p.span = s;
    p.rank = track.rank;
    p.code = code;
    out.push_back(std::move(p));
  });
  if (out.empty()) return out;
  // Arguments come ordered by span id; the picked spans are in start order.
  std::vector<size_t> byId(out.size());
  for (size_t i = 0; i < byId.size(); ++i) byId[i] = i;
  std::sort(byId.begin(), byId.end(),
            [&](size_t a, size_t b) { return out[a].span.id < out[b].span.id; });
  size_t k = 0;
  for (const ArgRow& a : reader.argsOfTrack(track.id)) {
    while (k < byId.size() && out[byId[k]].span.id < a.span) ++k;
    if (k == byId.size()) break;
    if (out[byId[k]].span.id == a.span) out[byId[k]].args.emplace_back(a.key, a.value);
  }
  return out;
}

void normalize(Intervals& v) {
  std::sort(v.begin(), v.end());
  size_t w = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (v[i].second <= v[i].first) continue;
    if (w > 0 && v[i].first <= v[w - 1].second) {
      v[w - 1].second = std::max(v[w - 1].second, v[i].second);
    } else {
      v[w++] = v[i];
    }
  }
  v.resize(w);
}

int64_t totalLength(const Intervals& v) {
  int64_t n = 0;
  for (const auto& [a, b] : v) n = satAdd(n, satSub(b, a));
  return n;
}

int64_t overlapLength(const Intervals& a, const Intervals& b) {
  int64_t n = 0;
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    const int64_t lo = std::max(a[i].first, b[j].first);
    const int64_t hi = std::min(a[i].second, b[j].second);
    if (hi > lo) n = satAdd(n, satSub(hi, lo));
    if (a[i].second < b[j].second) {
      ++i;
    } else {
      ++j;
    }
  }
  return n;
}

bool contains(const Intervals& v, int64_t t) {
  auto it = std::upper_bound(v.begin(), v.end(), std::make_pair(t, INT64_MAX));
  if (it == v.begin()) return false;
  --it;
  return t >= it->first && t <= it->second;
}

int64_t median(std::vector<int64_t> values) {
  if (values.empty()) return 0;
  const size_t mid = (values.size() - 1) / 2;
  std::nth_element(values.begin(), values.begin() + static_cast<std::ptrdiff_t>(mid), values.end());
  return values[mid];
}

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t n = values.size();
  return n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}

}  // namespace tracerun::trace::analysis
