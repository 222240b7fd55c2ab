// Shared pieces of the trainer tests: where the binaries are, a scratch directory per test,
// the tiny model's flags, and reading gpttrain's --log-json. No assertions here.
#pragma once

#include "rank_launcher.h"

#include <map>
#include <string>
#include <vector>

namespace gpttrain::testing {

inline const std::string kGpttrain = GPTTRAIN_EXE;

// A fresh directory for one test case under the build tree.
std::string scratchDir(const std::string& name);

// The tiny fp32 model of the equivalence tests: 2 layers, hidden 32, 4 heads, seq 16, vocab 64,
// dropout 0, global batch 8, micro-batch 2, 5 steps; small buckets so DP has several.
std::vector<std::string> tinyModelArgs();

// `key` of every JSON line of a --log-json file that has it, in order.
std::vector<double> jsonValues(const std::string& path, const std::string& key);

// Rank 0's peak bytes of each model-state category (parameter, gradient, optimizer_state) in the
// text of `tracerun report --json` (the memory section's category_peaks); a category not found is
// left out, so callers check the size.
std::map<std::string, long long> categoryPeaks(const std::string& report_json);

// Concatenation helper: a + b.
std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b);

}  // namespace gpttrain::testing
