// io/weights/model_config.cpp: the small helpers of ModelConfig.
#include "io/weights/model_config.h"

#include <algorithm>

namespace kascade {

std::string_view rope_scaling_type_name(RopeScalingType type) {
    switch (type) {
        case RopeScalingType::None:
            return "default";
        case RopeScalingType::Linear:
            return "linear";
        case RopeScalingType::Llama3:
            return "llama3";
        case RopeScalingType::Yarn:
            return "yarn";
    }
    return "default";
}

bool ModelConfig::has_window() const {
    return std::any_of(layer_window.begin(), layer_window.end(), [](int w) { return w > 0; });
}

}  // namespace kascade
