// io/host_info.h: where a measurement was taken, recorded beside every run and benchmark row.
#pragma once

#include <string>

namespace kascade {

/// "<hostname> (<CPU model name>)".
std::string machine_description();

}  // namespace kascade
