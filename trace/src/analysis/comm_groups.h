// Which ranks' collective calls form one group, when no span names the group's members: the one
// rule of analyzeComm (comm.h) and the viewer's collective instances (comm_instances.h).
//
// Ranks that made the same calls (one signature: op, shapes, bytes and, when the capture knew it,
// the group's size) the same number of times, every k-th call overlapping in time, are one group.
// Two groups making identical calls in lockstep (tensor parallel {0,1} and {2,3}) overlap too: a
// component larger than the recorded group size is then cut by the ranks' places in their groups
// (group_rank); ranks left over, and ranks sharing a place, stand alone (comm_groups.cpp). Not for
// calls whose members are named (the c10d decorator's tracks).
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace tracerun::trace::analysis {

// One call of one rank, as the matching needs it.
struct GroupCall {
  int64_t start = 0, end = 0;
  int group_size = 0;       // recorded (the span's group_size argument); 0: unknown
  int64_t group_rank = -1;  // this rank's place in the group; -1: unknown
};

// signature -> rank -> that rank's calls of it, in any order
using GroupCalls = std::map<std::string, std::map<int, std::vector<GroupCall>>>;

// Per signature: the groups its calls form, each a sorted list of ranks (a rank alone when it
// matched nobody).
std::map<std::string, std::vector<std::vector<int>>> matchGroups(GroupCalls calls);

// What must match across a group's calls: op, shapes text, bytes and, when recorded, the group's
// size ("all_reduce|f32[64]|256|2 ranks": groups of different sizes never mix). The one spelling
// of analyzeComm and the viewer's collective instances; part of the group names the viewer shows.
std::string callSignature(const std::string& op, const std::string& detail, int64_t bytes,
                          int group_size);

// callSignature of the comm span named `span` (op: its normalized name). NCCL's data calls keep
// their detail, the communicator. Other spans' detail is their shapes; Gloo's scatter span names
// the tensors the root sends and none on the other ranks, so a scatter's shapes and bytes are left
// out: its op and group size are what its ranks share (its row's bytes are the root's send
// buffer: comm.h).
std::string spanCallSignature(const std::string& span, const std::string& op,
                              const std::string& detail, int64_t bytes, int group_size);

// The group's name (vocab::arg::kGroupId) joins the signature ("|group 2": torch's groups {0,3}
// and {1,2}, or two groups of one size on a rank, never mix) only where every call of that
// signature in that attempt of a restarted job, on every rank, has one: a rank whose capture ran
// out of names, or calls made where none was given, must not split a group that size and place
// match. note() every call (decorator calls aside: their tracks name their groups), then named().
class GroupNames {
 public:
  void note(const std::string& signature, int attempt, int64_t group_id);
  // The signature with the group's name ("|group 2") where every call noted under it in that
  // attempt had one; else the signature.
  std::string named(const std::string& signature, int attempt, int64_t group_id) const;

 private:
  std::set<std::pair<std::string, int>> unnamed_;  // (signature, attempt) with an unnamed call
};

}  // namespace tracerun::trace::analysis
