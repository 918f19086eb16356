// The sweep file fuzz target: load_sweep_spec as `kascade sweep` calls it, and the promises the parsed spec makes
// to the sweep runner.
#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "pipeline/sweep/sweep_spec.h"

namespace kascade::fuzz {

bool fuzz_sweep_toml(FuzzInput input) {
    try {
        const SweepSpec spec = load_sweep_spec(write_input_file("sweep.toml", input));
        require(!spec.model.empty() && !spec.text.empty(), "a sweep without a model or text path was accepted");
        require(!spec.ctx.empty() && !spec.tile.empty() && !spec.topk.empty(), "an empty grid was accepted");
        for (const int c : spec.ctx)
            for (const int t : spec.tile) require(t >= 1 && t <= c, fmt::format("tile {} with ctx {}", t, c));
        require(spec.calib_offset >= 0 && spec.calib_tokens > 0 && spec.test_offset >= 0 && spec.test_tokens > 0,
                "a negative token range was accepted");
        for (const ScheduleParams& s : spec.schedules)
            require(s.policy != SchedulePolicy::Fixed || !s.anchor_list.empty(),
                    "a fixed schedule without anchors was accepted");
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
