// tests/common/shared_files.h: the models, texts and fixtures that tests in several files read: the read-only
// KASCADE_SHARED_DIR (top-level CMakeLists.txt) and tests/fixtures.
#pragma once

#include <filesystem>

namespace kascade::test {

/// The folder with models/ and data/.
inline const std::filesystem::path kSharedDir = KASCADE_SHARED_DIR;

/// llama2.c's stories260K checkpoint, its tokenizer, and a TinyStories text it was trained on.
inline const std::filesystem::path kStoriesBin = kSharedDir / "models/stories260K/stories260K.bin";
inline const std::filesystem::path kStoriesTok = kSharedDir / "models/stories260K/tok512.bin";
inline const std::filesystem::path kStoriesText = kSharedDir / "data/tinystories/TinyStories-valid.head.txt";

/// The small model of tests/fixtures that retrieves a passkey, with its tokenizer and reference outputs.
inline const std::filesystem::path kRetrievalModel =
    std::filesystem::path(KASCADE_SOURCE_DIR) / "tests/fixtures/retrieval-model";

}  // namespace kascade::test
