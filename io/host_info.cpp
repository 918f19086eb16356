#include "io/host_info.h"

#include <unistd.h>

#include <fstream>

namespace kascade {

std::string machine_description() {
    char host[256] = {0};
    ::gethostname(host, sizeof host - 1);
    std::ifstream cpuinfo("/proc/cpuinfo");
    std::string line, cpu = "unknown cpu";
    while (std::getline(cpuinfo, line)) {
        if (line.rfind("model name", 0) == 0) {
            cpu = line.substr(line.find(':') + 2);
            break;
        }
    }
    return std::string(host) + " (" + cpu + ")";
}

}  // namespace kascade
