// tests/fuzz/entries/fuzz_support.h: what every fuzz entry needs: the input as a file, and invariant checks.
#pragma once

#include <filesystem>
#include <string_view>

#include "fuzz_entries.h"

namespace kascade::fuzz {

/// This process's scratch folder (created on first use, removed at exit): each entry writes its input there.
const std::filesystem::path& scratch_dir();

/// Writes `input` to scratch_dir() / `name` (replacing the previous input) and returns its path.
std::filesystem::path write_input_file(std::string_view name, FuzzInput input);

/// A promise the loader makes about what it accepted, e.g. "a loaded config has n_layers > 0". Breaking it is a bug
/// the fuzzer must report: prints `what` and aborts.
void require(bool holds, std::string_view what);

}  // namespace kascade::fuzz
