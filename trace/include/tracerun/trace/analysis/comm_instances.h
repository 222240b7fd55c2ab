// Collective instances across ranks: every collective call matched with the same call on the other
// members of its group (process group and sequence number), each rank's arrival, start, end and
// wait, the rank that arrived last, and the stragglers (who arrives last most often). What the
// viewer's collectives tab shows; not the report's per-op sums (comm.h), though it reads the same
// spans by the same rules (below).
//
// Which spans (as analyzeComm): comm-category spans that are not send / recv; on a rank where
// tracerun's c10d decorator recorded calls (async tracks "c10d NAME [r0,r1,...]"), only those.
// Instances:
// - decorator spans: group = the track's name (group name and members), sequence = the span's
//   "seq" argument (the decorator's per-group counter, the same on every member for one call);
//   without it, the call's ordinal on that track;
// - other spans: group = op and signature (op, shapes, bytes, recorded group size: what
//   analyzeComm matches across ranks), members = the ranks matched with this rank as analyzeComm
//   matches them (comm_groups.h: calls overlapping in time, cut by recorded group ranks); the
//   ranks matched with nobody form one group (a trace cut short still pairs its k-th calls);
//   sequence = the call's ordinal on its rank (analyzeComm pairs the k-th calls).
// Per rank of an instance: arrival = the span's start (when the rank called); start = when the
// last member arrived, clamped to [arrival, end] (no data moves before every member is there);
// end = the span's end; wait = start - arrival; lag = arrival - the instance's first arrival.
// The last to arrive: the latest arrival (ties: the lowest rank). Stragglers count only instances
// with two or more members present.
// Threading: one call uses the reader from the calling thread only.
#pragma once

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "tracerun/trace/reader.h"

namespace tracerun::trace::analysis {

struct InstanceRank {
  int rank = 0;
  int64_t span_id = 0;
  int64_t arrival_ns = 0, start_ns = 0, end_ns = 0;
  int64_t wait_ns = 0;  // start - arrival
  int64_t lag_ns = 0;   // arrival - first arrival of the instance
};

struct CollectiveInstance {
  int group = 0;                    // index into CommInstances::groups
  int64_t seq = 0;                  // sequence number within the group
  std::string op;                   // normalized (all_reduce, broadcast...)
  std::vector<InstanceRank> ranks;  // the members present, by rank
  int last_rank = -1;               // the last to arrive
  int64_t spread_ns = 0;            // last arrival - first arrival
};

struct CollectiveGroup {
  // "c10d dp [0,1,2,3]"; unannotated "all_reduce|f32[64]|256 [0,1]" ("|2 ranks" before the
  // members when the size was recorded): unique, as two groups may share a signature
  std::string name;
  std::vector<int> members;       // sorted ranks
  std::vector<size_t> instances;  // indices into CommInstances::instances, by sequence
};

struct StragglerRow {
  int rank = 0;
  int64_t last = 0;            // instances in which this rank arrived last
  int64_t instances = 0;       // instances (2+ members present) it took part in
  int64_t caused_wait_ns = 0;  // when last: the other members' waits, summed
};

struct CommInstances {
  std::vector<CollectiveGroup> groups;        // by name
  std::vector<CollectiveInstance> instances;  // by group, then sequence
  std::vector<StragglerRow> stragglers;       // most often last first, then rank
  // (span id, instance index), sorted by span id: which instance a span belongs to.
  std::vector<std::pair<int64_t, size_t>> by_span;
  // The instance holding span `id`, or nullptr.
  const CollectiveInstance* instanceOfSpan(int64_t id) const;
};

// `cancel` (optional) stops the work early between tracks; the result is then partial.
CommInstances analyzeCommInstances(const TraceReader& reader,
                                   const std::atomic<bool>* cancel = nullptr);

}  // namespace tracerun::trace::analysis
