// tests/fuzz/driver/libfuzzer_main.cpp: libFuzzer's entry point for one target, chosen at compile time by
// KASCADE_FUZZ_ENTRY (tests/fuzz/CMakeLists.txt builds one executable fuzz_<name> per target).
#include <cstddef>
#include <cstdint>

#include "fuzz_entries.h"

#ifndef KASCADE_FUZZ_ENTRY
#error "KASCADE_FUZZ_ENTRY must name one of the functions of fuzz_entries.h"
#endif

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    static_cast<void>(kascade::fuzz::KASCADE_FUZZ_ENTRY(kascade::fuzz::FuzzInput(data, size)));
    return 0;
}
