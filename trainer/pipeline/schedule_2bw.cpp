// 2bw's flag checks (see schedule_2bw.h); its action lists are the schedule library's.
#include "pipeline/schedule_2bw.h"

namespace gpttrain {

std::string twoBwConfigError(const TrainConfig& c, int) {
  const bool two_bw = c.schedule == ScheduleKind::kTwoBw;
  if (!two_bw && !c.delayed_update) return "";
  const std::string what = two_bw ? "--schedule 2bw" : "--delayed-update";
  if (c.zero != 0) {
    return what + " keeps two full weight versions per stage; --zero " + std::to_string(c.zero) +
           " is not supported (use --zero 0)";
  }
  if (c.precision == "bf16-mixed") {
    return what +
           " does not support --precision bf16-mixed (master weights of two versions); "
           "use fp32 or bf16-autocast";
  }
  if (!c.dump_grads.empty()) return what + " does not support --dump-grads";
  if (two_bw && c.clip_grad > 0) {
    return "--schedule 2bw has no global gradient-norm clip (it would be a barrier across "
           "stages every step): leave --clip-grad out or give 0";
  }
  return "";
}

}  // namespace gpttrain
