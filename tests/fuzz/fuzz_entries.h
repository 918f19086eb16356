// tests/fuzz/fuzz_entries.h: the fuzz targets of kascade's file parsers, one entry function per format.
//
// Each entry gives the parser `input` as a file (most kascade loaders take a path), then uses what loaded, and
// returns whether the parser accepted the input. A kascade::Error is the expected answer to a bad file and is
// swallowed (false); anything else (a crash, a sanitizer report, another exception type, a broken invariant of what
// loaded) is a bug and escapes or aborts. The same functions
// run under libFuzzer (driver/libfuzzer_main.cpp, built with -DKASCADE_FUZZ=ON) and, in every normal build, on the
// committed seeds and regression inputs (replay_test.cpp).
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

namespace kascade::fuzz {

using FuzzInput = std::span<const std::uint8_t>;

/// A safetensors file (SafetensorsFile): header length, JSON header, data offsets; then every tensor's bytes.
bool fuzz_safetensors(FuzzInput input);
/// A Hugging Face config.json (load_hf_config).
bool fuzz_hf_config(FuzzInput input);
/// A Hugging Face tokenizer.json (load_tokenizer), then encoding and decoding with it.
bool fuzz_tokenizer_json(FuzzInput input);
/// A llama2.c tokenizer.bin (load_tokenizer), then encoding and decoding with it.
bool fuzz_tokenizer_bin(FuzzInput input);
/// A tiktoken rank file, Llama 3's tokenizer.model (TiktokenTokenizer), then encoding and decoding with it.
bool fuzz_tokenizer_tiktoken(FuzzInput input);
/// A GGUF model file (load_model): container, llama.* keys and every tensor dequantized; then its embedded
/// tokenizer (load_tokenizer), encoding and decoding with it.
bool fuzz_gguf(FuzzInput input);
/// A llama2.c checkpoint .bin (load_model): header and weight layout; then every weight is read.
bool fuzz_llama2c_checkpoint(FuzzInput input);
/// A torch.save data.pkl (read_torch_pickle, the restricted unpickler of Meta's consolidated.NN.pth).
bool fuzz_torch_pickle(FuzzInput input);
/// A zip archive (ZipArchive) with every entry read; then, where it is one, the torch.save file (TorchCheckpoint).
bool fuzz_zip_archive(FuzzInput input);
/// A sweep file (load_sweep_spec), with the model and text paths it names existing.
bool fuzz_sweep_toml(FuzzInput input);
/// An HDF5 artifact (H5ArtifactReader, read_artifact_header), then every group and dataset in it.
bool fuzz_h5_artifact(FuzzInput input);
/// A shard's kascade.db, merged (merge_shards, as `kascade merge`) into a fresh folder: refused without a trace,
/// or every artifact row merged with its verified file.
bool fuzz_merge_shard(FuzzInput input);
/// A `kascade chat` messages file (read_chat_messages), then rendered with every chat template family.
bool fuzz_chat_messages(FuzzInput input);
/// A chat_template text (recognize_chat_template): recognised as one family or refused.
bool fuzz_chat_template(FuzzInput input);

struct FuzzTarget {
    std::string_view name;  ///< the folder of its seeds (corpus/<name>) and regression inputs (regressions/<name>)
    bool (*entry)(FuzzInput);
};

/// Every target, in the order above; the fuzz executables are called fuzz_<name>.
inline constexpr FuzzTarget kFuzzTargets[] = {
    {"safetensors", fuzz_safetensors},
    {"hf_config", fuzz_hf_config},
    {"tokenizer_json", fuzz_tokenizer_json},
    {"tokenizer_bin", fuzz_tokenizer_bin},
    {"tokenizer_tiktoken", fuzz_tokenizer_tiktoken},
    {"gguf", fuzz_gguf},
    {"llama2c_checkpoint", fuzz_llama2c_checkpoint},
    {"torch_pickle", fuzz_torch_pickle},
    {"zip_archive", fuzz_zip_archive},
    {"sweep_toml", fuzz_sweep_toml},
    {"h5_artifact", fuzz_h5_artifact},
    {"merge_shard", fuzz_merge_shard},
    {"chat_messages", fuzz_chat_messages},
    {"chat_template", fuzz_chat_template},
};

}  // namespace kascade::fuzz
