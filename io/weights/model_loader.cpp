// io/weights/model_loader.cpp: load_model, choosing the format from what the path is.
#include <filesystem>

#include "base/error.h"
#include "io/weights/gguf_checkpoint.h"
#include "io/weights/hf_checkpoint.h"
#include "io/weights/llama2c_checkpoint.h"
#include "io/weights/meta_checkpoint.h"
#include "io/weights/model_weights.h"

namespace kascade {

ModelWeights load_model(const std::filesystem::path& path, const LoadOptions& options) {
    namespace fs = std::filesystem;
    std::error_code ec;
    const fs::file_status status = fs::status(path, ec);
    KASCADE_CHECK(fs::exists(status), "cannot open model \"{}\": no such file or directory", path.string());
    if (fs::is_directory(status)) {
        const fs::path config = path / "config.json";
        const fs::path single = path / "model.safetensors";
        const fs::path index = path / "model.safetensors.index.json";
        if (!fs::exists(config) && is_meta_checkpoint_dir(path)) return load_meta_checkpoint(path, options);
        KASCADE_CHECK(fs::exists(config),
                      "{}: model directory has no config.json (Hugging Face) and no params.json with "
                      "consolidated.NN.pth shards (Meta)",
                      path.string());
        if (fs::exists(single)) return load_hf_checkpoint(config, single, options);
        KASCADE_CHECK(fs::exists(index),
                      "{}: model directory has neither model.safetensors nor model.safetensors.index.json",
                      path.string());
        return load_hf_checkpoint(config, index, options);
    }
    if (path.extension() == ".safetensors" || path.filename().string().ends_with(".safetensors.index.json")) {
        const fs::path config = path.parent_path() / "config.json";
        KASCADE_CHECK(fs::exists(config), "{}: no config.json beside it (needed for the model's hyper-parameters)",
                      path.string());
        return load_hf_checkpoint(config, path, options);
    }
    if (path.extension() == ".gguf") return load_gguf_checkpoint(path, options);
    KASCADE_CHECK(path.extension() == ".bin",
                  "cannot load model \"{}\": expected a llama2.c .bin checkpoint, a .safetensors file, a .gguf file "
                  "or a Hugging Face model directory",
                  path.string());
    return load_llama2c_checkpoint(path, options);
}

}  // namespace kascade
