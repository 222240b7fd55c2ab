// The shared span pass (see span_pass.h): one forEachSpan per track for every consumer, and one
// argument query per track for the spans they picked.
#include "span_pass.h"

#include <algorithm>

namespace tracerun::trace::analysis {

namespace {

// Gives each picked span its arguments from `args` (ordered by span id, then as stored).
void fillArgs(const std::vector<ArgRow>& args, std::vector<PickedSpan>& picked) {
  std::vector<size_t> byId(picked.size());
  for (size_t i = 0; i < byId.size(); ++i) byId[i] = i;
  std::sort(byId.begin(), byId.end(),
            [&](size_t a, size_t b) { return picked[a].span.id < picked[b].span.id; });
  size_t k = 0;
  for (const ArgRow& a : args) {
    while (k < byId.size() && picked[byId[k]].span.id < a.span) ++k;
    if (k == byId.size()) break;
    if (picked[byId[k]].span.id == a.span) picked[byId[k]].args.emplace_back(a.key, a.value);
  }
}

}  // namespace

void runSpanPass(const TraceReader& reader, const std::vector<TrackRow>& tracks,
                 const std::vector<SpanConsumer*>& consumers) {
  std::vector<SpanConsumer*> active;
  std::vector<std::vector<PickedSpan>> picked;
  std::vector<int64_t> ids;
  for (const TrackRow& t : tracks) {
    active.clear();
    for (SpanConsumer* c : consumers) {
      if (c != nullptr && c->wantsTrack(t)) active.push_back(c);
    }
    if (active.empty()) continue;
    picked.assign(active.size(), {});
    reader.forEachSpan(t.id, [&](const SpanRow& s) {
      for (size_t i = 0; i < active.size(); ++i) {
        const int code = active[i]->onSpan(s);
        if (code == 0) continue;
        PickedSpan p;
        p.span = s;
        p.rank = t.rank;
        p.code = code;
        picked[i].push_back(std::move(p));
      }
    });
    ids.clear();
    for (const auto& list : picked) {
      for (const PickedSpan& p : list) ids.push_back(p.span.id);
    }
    if (!ids.empty()) {
      std::sort(ids.begin(), ids.end());
      ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      const std::vector<ArgRow> args = reader.argsOfSpans(ids);
      for (auto& list : picked) fillArgs(args, list);
    }
    for (size_t i = 0; i < active.size(); ++i) active[i]->endTrack(t, picked[i]);
  }
}

}  // namespace tracerun::trace::analysis
