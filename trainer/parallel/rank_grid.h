// The rank grid WORLD = TP x DP x PP with TP varying fastest, then DP, then PP (Megatron's order):
// pure arithmetic on integers. It builds no process groups (see process_groups.h).
#pragma once

#include <vector>

namespace gpttrain {

struct RankCoords {
  int tp = 0;
  int dp = 0;
  int pp = 0;
};

class RankGrid {
 public:
  // Requires world % (tp * pp) == 0 (checked by layoutError in config.h before this is built).
  RankGrid(int world, int tp, int pp) : world_(world), tp_(tp), pp_(pp), dp_(world / (tp * pp)) {}

  int world() const { return world_; }
  int tpSize() const { return tp_; }
  int ppSize() const { return pp_; }
  int dpSize() const { return dp_; }

  RankCoords coords(int rank) const {
    return RankCoords{rank % tp_, (rank / tp_) % dp_, rank / (tp_ * dp_)};
  }
  int rankOf(RankCoords c) const { return c.tp + tp_ * (c.dp + dp_ * c.pp); }

  // Global ranks of the group that contains `rank` and varies only the named coordinate.
  std::vector<int> tpGroup(int rank) const { return vary(rank, &RankCoords::tp, tp_); }
  std::vector<int> dpGroup(int rank) const { return vary(rank, &RankCoords::dp, dp_); }
  std::vector<int> ppGroup(int rank) const { return vary(rank, &RankCoords::pp, pp_); }

 private:
  std::vector<int> vary(int rank, int RankCoords::*field, int n) const {
    std::vector<int> ranks;
    RankCoords c = coords(rank);
    for (int i = 0; i < n; ++i) {
      c.*field = i;
      ranks.push_back(rankOf(c));
    }
    return ranks;
  }

  int world_;
  int tp_;
  int pp_;
  int dp_;
};

}  // namespace gpttrain
