// tests/tokenizer/hf_tokenizer_config_test.cpp: what the tokenizer_config.json beside a tokenizer.json says about
// BOS / EOS (add_bos_token, add_eos_token, bos_token, eos_token), and broken config files.
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

/// SmolLM2's tokenizer.json in `dir`, with `config` (if not empty) as the tokenizer_config.json beside it.
std::unique_ptr<Tokenizer> load_with_config(const test::TempDir& dir, std::string_view config) {
    const auto path = dir.write("tokenizer.json", read_file(test::kSmolLm2Json));
    if (!config.empty()) dir.write("tokenizer_config.json", config);
    return load_tokenizer(path);
}

TEST(TokenizerConfig, AddBosAndEosToken) {
    {
        test::TempDir dir;
        const auto tok = load_with_config(dir, R"({"add_bos_token": false, "add_eos_token": true})");
        EXPECT_EQ(tok->adds_bos_token(), std::optional<bool>(false));
        EXPECT_EQ(tok->adds_eos_token(), std::optional<bool>(true));
    }
    {
        test::TempDir dir;
        const auto tok = load_with_config(dir, R"({"add_bos_token": true, "bos_token": "<|im_start|>"})");
        EXPECT_EQ(tok->adds_bos_token(), std::optional<bool>(true));
        EXPECT_EQ(tok->adds_eos_token(), std::nullopt);
        EXPECT_EQ(tok->bos_id(), 1);  // <|im_start|>
    }
    for (const char* silent : {"", R"({})", R"({"add_bos_token": null, "model_max_length": 8192})"}) {
        test::TempDir dir;
        const auto tok = load_with_config(dir, silent);
        EXPECT_EQ(tok->adds_bos_token(), std::nullopt) << silent;
        EXPECT_EQ(tok->adds_eos_token(), std::nullopt) << silent;
    }
    // A llama2.c tokenizer has no such file.
    EXPECT_EQ(load_tokenizer(test::kTok512)->adds_bos_token(), std::nullopt);
}

/// Loads SmolLM2's tokenizer.json beside `config` and returns the error message (empty if it loaded).
std::string config_error(std::string_view config) {
    test::TempDir dir;
    try {
        load_with_config(dir, config);
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find("tokenizer_config.json"), std::string::npos) << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
        return message;
    }
    ADD_FAILURE() << "expected an error for " << config;
    return {};
}

TEST(TokenizerConfig, BadFilesAreRefused) {
    EXPECT_NE(config_error(R"({"add_bos_token": true,)").find("not valid JSON"), std::string::npos);
    const std::string text = config_error(R"({"add_bos_token": "yes"})");
    EXPECT_NE(text.find(R"(add_bos_token = "yes" must be true, false or null)"), std::string::npos) << text;
    const std::string number = config_error(R"({"add_eos_token": 1})");
    EXPECT_NE(number.find("add_eos_token = 1 must be true, false or null"), std::string::npos) << number;
    const std::string array = config_error(R"([true])");
    EXPECT_NE(array.find("expected a JSON object at the top level, found array"), std::string::npos) << array;
}

}  // namespace
}  // namespace kascade
