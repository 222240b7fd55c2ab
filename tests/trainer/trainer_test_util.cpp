// Shared pieces of the trainer tests (see trainer_test_util.h).
#include "trainer_test_util.h"

#include <filesystem>
#include <fstream>

namespace gpttrain::testing {

std::string scratchDir(const std::string& name) {
  const std::string dir = std::string(TRAINER_TEST_SCRATCH) + "/" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

std::vector<std::string> tinyModelArgs() {
  return {"--layers",
          "2",
          "--hidden",
          "32",
          "--heads",
          "4",
          "--seq-len",
          "16",
          "--vocab",
          "64",
          "--dropout",
          "0",
          "--global-batch",
          "8",
          "--micro-batch-size",
          "2",
          "--steps",
          "5",
          "--seed",
          "7",
          "--bucket-mb",
          "0.02",
          "--quiet"};
}

std::vector<double> jsonValues(const std::string& path, const std::string& key) {
  std::vector<double> values;
  std::ifstream in(path);
  std::string line;
  const std::string needle = "\"" + key + "\":";
  while (std::getline(in, line)) {
    const size_t at = line.find(needle);
    if (at != std::string::npos) values.push_back(std::stod(line.substr(at + needle.size())));
  }
  return values;
}

std::vector<std::string> operator+(std::vector<std::string> a, const std::vector<std::string>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::map<std::string, long long> categoryPeaks(const std::string& json) {
  std::map<std::string, long long> out;
  const size_t peaks = json.find("\"category_peaks\"", json.find("\"memory\""));
  if (peaks == std::string::npos) return out;
  for (const char* category : {"parameter", "gradient", "optimizer_state"}) {
    const std::string key = std::string("\"") + category + "\": ";
    const size_t p = json.find(key, peaks);
    if (p != std::string::npos) out[category] = std::stoll(json.substr(p + key.size()));
  }
  return out;
}

}  // namespace gpttrain::testing
