// tests/tokenizer/tiktoken_tokenizer_test.cpp: Meta's Llama 3 tokenizer.model (tiktoken ranks): the special-token
// layout, tokenizer_config.json beside it, round trips on real text, and broken rank files. The ids themselves are
// checked against the npm package tiktoken in tiktoken_reference_test.cpp.
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "base/error.h"
#include "io/file_util.h"
#include "io/tokenizer/tiktoken_tokenizer.h"
#include "io/tokenizer/tokenizer.h"
#include "tokenizer_test_util.h"

namespace kascade {
namespace {

using test::kLlama3Model;

/// Base64 written out here, apart from the reader's decoder, so that a fault in one is not hidden by the other.
std::string base64(std::string_view bytes) {
    static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    std::string out;
    for (std::size_t i = 0; i < bytes.size(); i += 3) {
        const std::size_t n = std::min<std::size_t>(3, bytes.size() - i);
        uint32_t group = 0;
        for (std::size_t j = 0; j < 3; ++j)
            group = (group << 8) | (j < n ? static_cast<unsigned char>(bytes[i + j]) : 0);
        for (std::size_t j = 0; j < 4; ++j) out += j <= n ? kAlphabet[(group >> (18 - 6 * j)) & 63] : '=';
    }
    return out;
}

/// A rank file with the 256 single bytes (ranks 0..255, in byte order) and then `merged` tokens.
std::string rank_file(const std::vector<std::string>& merged = {}) {
    std::string text;
    int rank = 0;
    for (int b = 0; b < 256; ++b)
        text += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(rank++) + "\n";
    for (const std::string& token : merged) text += base64(token) + " " + std::to_string(rank++) + "\n";
    return text;
}

/// The real file's lines, so that a test can break one of them.
std::vector<std::string> llama3_lines() {
    std::vector<std::string> lines;
    const std::string text = read_file(kLlama3Model);
    for (std::size_t pos = 0; pos < text.size();) {
        const std::size_t eol = text.find('\n', pos);
        lines.push_back(text.substr(pos, eol - pos));
        pos = eol + 1;
    }
    return lines;
}

std::string join_lines(const std::vector<std::string>& lines) {
    std::string text;
    for (const std::string& line : lines) text += line + "\n";
    return text;
}

/// Loads `text` as tokenizer.model (beside `config` if not empty) and returns the one-line error naming the file.
std::string tiktoken_load_error(std::string_view text, std::string_view config = {}) {
    test::TempDir dir;
    const auto path = dir.write("tokenizer.model", text);
    if (!config.empty()) dir.write("tokenizer_config.json", config);
    try {
        load_tokenizer(path);
    } catch (const Error& e) {
        const std::string message = e.what();
        EXPECT_NE(message.find(config.empty() ? "tokenizer.model" : "tokenizer_config.json"), std::string::npos)
            << message;
        EXPECT_EQ(message.find('\n'), std::string::npos) << "not one line: " << message;
        return message;
    }
    ADD_FAILURE() << "expected an error";
    return {};
}

/// The real rank file alone in a folder (no tokenizer_config.json), loaded once for the suite.
class Llama3RanksTest : public ::testing::Test {
  protected:
    static void SetUpTestSuite() {
        dir_ = new test::TempDir("llama3");
        const auto path = dir_->write("tokenizer.model", read_file(kLlama3Model));
        tok_ = load_tokenizer(path).release();
    }
    static void TearDownTestSuite() {
        delete tok_;
        delete dir_;
        tok_ = nullptr;
        dir_ = nullptr;
    }
    static test::TempDir* dir_;
    static Tokenizer* tok_;
};
test::TempDir* Llama3RanksTest::dir_ = nullptr;
Tokenizer* Llama3RanksTest::tok_ = nullptr;

TEST_F(Llama3RanksTest, MetasSpecialTokenLayout) {
    const auto& tok = dynamic_cast<const TiktokenTokenizer&>(*tok_);
    EXPECT_EQ(tok.kind(), "tiktoken-llama3");
    EXPECT_EQ(tok.n_ranks(), 128000);
    EXPECT_EQ(tok.vocab_size(), 128256);
    EXPECT_EQ(tok.bos_id(), 128000);
    EXPECT_EQ(tok.eos_id(), 128001);  // no tokenizer_config.json: the base model's <|end_of_text|>
    EXPECT_EQ(tok.adds_bos_token(), std::nullopt);
    // Ids from Meta's llama3 tokenizer.py and the Hugging Face config of the same model (see the test below).
    EXPECT_EQ(tok.token_id("<|begin_of_text|>"), 128000);
    EXPECT_EQ(tok.token_id("<|end_of_text|>"), 128001);
    EXPECT_EQ(tok.token_id("<|reserved_special_token_0|>"), 128002);
    EXPECT_EQ(tok.token_id("<|reserved_special_token_3|>"), 128005);
    EXPECT_EQ(tok.token_id("<|start_header_id|>"), 128006);
    EXPECT_EQ(tok.token_id("<|end_header_id|>"), 128007);
    EXPECT_EQ(tok.token_id("<|reserved_special_token_4|>"), 128008);
    EXPECT_EQ(tok.token_id("<|eot_id|>"), 128009);
    EXPECT_EQ(tok.token_id("<|reserved_special_token_5|>"), 128010);
    EXPECT_EQ(tok.token_id("<|reserved_special_token_250|>"), 128255);
    EXPECT_EQ(tok.decode_piece(-1, 128009), "<|eot_id|>");
    EXPECT_THROW(tok.decode_piece(-1, 128256), Error);
}

TEST_F(Llama3RanksTest, LayoutEqualsTheInstructConfig) {
    // The tokenizer_config.json shipped with Llama-3-8B-Instruct lists the same 256 tokens at the same ids.
    const auto with_config = load_tokenizer(kLlama3Model);
    const auto& tok = dynamic_cast<const TiktokenTokenizer&>(*with_config);
    const std::vector<std::string> meta = TiktokenTokenizer::llama3_special_tokens();
    ASSERT_EQ(meta.size(), 256u);
    for (int i = 0; i < 256; ++i) {
        EXPECT_EQ(tok.decode_piece(-1, 128000 + i), meta[i]) << i;
        EXPECT_EQ(tok_->decode_piece(-1, 128000 + i), meta[i]) << i;
    }
    EXPECT_EQ(tok.bos_id(), 128000);
    EXPECT_EQ(tok.eos_id(), 128009);  // the Instruct config's eos_token is <|eot_id|>
}

// "Hello world" as Llama 3 tokenizes it (published widely; tiktoken gives the same, see the reference test).
TEST_F(Llama3RanksTest, KnownIds) {
    EXPECT_EQ(tok_->encode("Hello world"), (std::vector<int32_t>{9906, 1917}));
    EXPECT_TRUE(tok_->encode("").empty());
}

TEST_F(Llama3RanksTest, SpecialTokensInTextAreRecognised) {
    const std::vector<int32_t> ids =
        tok_->encode("<|begin_of_text|><|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>");
    ASSERT_GE(ids.size(), 5u);
    EXPECT_EQ(ids.front(), 128000);
    EXPECT_EQ(ids[1], 128006);
    EXPECT_EQ(ids.back(), 128009);
    // A broken special token is plain text.
    for (const int32_t id : tok_->encode("<|eot_id|")) EXPECT_LT(id, 128000);
}

TEST_F(Llama3RanksTest, RoundTripsRealText) {
    for (const auto& path : {test::kTinyStories, test::kWikiTest, test::kMobyDick}) {
        const std::string text = read_file(path);
        const std::vector<int32_t> ids = tok_->encode(text);
        EXPECT_LT(ids.size(), text.size() / 3) << path;  // real merging happened
        EXPECT_EQ(tok_->decode(ids), text) << path;
    }
    const std::string edge = "  \t\n\r\n x  <|eot_id|>日本語 é 🙂 12345678 it's IT'S\n\n\n   ";
    EXPECT_EQ(tok_->decode(tok_->encode(edge)), edge);
}

TEST(TiktokenTokenizer, WholePieceIsOneTokenEvenWhereMergesCannotReachIt) {
    // "abc" is a token, but neither "ab" nor "bc" is: merging single bytes can never reach it. tiktoken looks a
    // split piece up as a whole first, so the word "abc" is that one token; "abcabc" is not a token and stays bytes.
    test::TempDir dir;
    const auto path = dir.write("ranks.tiktoken", rank_file({"abc"}));
    const auto tok = load_tokenizer(path);
    EXPECT_EQ(tok->kind(), "tiktoken-llama3");
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{256}));
    EXPECT_EQ(tok->encode("abcabc"), (std::vector<int32_t>{'a', 'b', 'c', 'a', 'b', 'c'}));
    EXPECT_EQ(tok->vocab_size(), 257 + 256);
    EXPECT_EQ(tok->bos_id(), 257);  // the special tokens follow the last rank, as in Meta's tokenizer.py
}

TEST(TiktokenTokenizer, LowestRankMergesFirst) {
    // "bc" (rank 256) before "ab" (rank 257): "abc" -> a + bc; then "abc" is not a token.
    test::TempDir dir;
    const auto tok = load_tokenizer(dir.write("tokenizer.model", rank_file({"bc", "ab", "xyz"})));
    EXPECT_EQ(tok->encode("abc"), (std::vector<int32_t>{'a', 256}));
    // Ties go to the leftmost pair: "aaa" with "aa" -> aa + a.
    const auto tied = load_tokenizer(dir.write("tokenizer.model", rank_file({"aa"})));
    EXPECT_EQ(tied->encode("aaa"), (std::vector<int32_t>{256, 'a'}));
}

TEST(TiktokenTokenizer, FoundNextToAModel) {
    test::TempDir dir;
    dir.write("model.safetensors", "x");
    dir.write("tokenizer.model", rank_file());
    EXPECT_EQ(find_tokenizer_for_model(dir.path() / "model.safetensors"), dir.path() / "tokenizer.model");
    dir.write("tokenizer.bin", "x");
    EXPECT_EQ(find_tokenizer_for_model(dir.path()), dir.path() / "tokenizer.model");
    // A Hugging Face folder holds both; its tokenizer.json is what transformers reads.
    dir.write("tokenizer.json", "{}");
    EXPECT_EQ(find_tokenizer_for_model(dir.path()), dir.path() / "tokenizer.json");
}

TEST(TiktokenTokenizerBadInput, BadBase64NamesTheLine) {
    std::vector<std::string> lines = llama3_lines();
    lines[999] = "SGVsb!8= 999";  // line 1000
    const std::string message = tiktoken_load_error(join_lines(lines));
    EXPECT_NE(message.find("tokenizer.model:1000: the token 'SGVsb!8=' is not base64: character '!' at position 6"),
              std::string::npos)
        << message;
    for (const char* bad : {"SGVsbG8 256", "SGVsbG9= 256", "SGVsbG8=== 256", "=GVsbG8= 256"}) {
        const std::string text = rank_file() + bad + "\n";
        EXPECT_NE(tiktoken_load_error(text).find("tokenizer.model:257: the token"), std::string::npos) << bad;
    }
}

TEST(TiktokenTokenizerBadInput, RanksMustCountUpLineByLine) {
    std::vector<std::string> lines = llama3_lines();
    lines[41] = lines[41].substr(0, lines[41].find(' ')) + " 40";  // line 42 repeats rank 40
    const std::string duplicate = tiktoken_load_error(join_lines(lines));
    EXPECT_NE(duplicate.find("tokenizer.model:42: rank 40 repeats or goes back (line 41 has rank 40"),
              std::string::npos)
        << duplicate;
    lines = llama3_lines();
    lines[41] = lines[41].substr(0, lines[41].find(' ')) + " 7";
    EXPECT_NE(tiktoken_load_error(join_lines(lines)).find(":42: rank 7 repeats or goes back"), std::string::npos);
    lines = llama3_lines();
    lines[41] = lines[41].substr(0, lines[41].find(' ')) + " 43";
    EXPECT_NE(tiktoken_load_error(join_lines(lines)).find(":42: rank 43 skips rank 41"), std::string::npos);
}

TEST(TiktokenTokenizerBadInput, MalformedLines) {
    const std::string base = rank_file();
    EXPECT_NE(tiktoken_load_error(base + "YWI=256\n").find(":257: expected '<base64 token> <rank>'"),
              std::string::npos);
    EXPECT_NE(tiktoken_load_error(base + "YWI=  256\n").find(":257: expected '<base64 token> <rank>'"),
              std::string::npos);
    EXPECT_NE(tiktoken_load_error(base + "YWI= -1\n").find(":257: rank '-1' is not an integer"), std::string::npos);
    EXPECT_NE(tiktoken_load_error(base + "YWI= 2x\n").find(":257: rank '2x' is not an integer"), std::string::npos);
    EXPECT_NE(tiktoken_load_error(base + "YWI= 99999999999\n").find(":257: rank '99999999999' is not an integer"),
              std::string::npos);
    // The same bytes twice: tiktoken's dictionary would keep only one of the two ranks.
    EXPECT_NE(tiktoken_load_error(base + "YQ== 256\n").find(":257: the token 'YQ==' has rank 97 already (line 98)"),
              std::string::npos);
    // Control bytes in a line are shown escaped, so the message stays one printable line.
    EXPECT_NE(tiktoken_load_error(base + "YWI=\t256\x01\n").find("found 'YWI=\\x09256\\x01'"), std::string::npos);
    // Windows line ends and blank lines are accepted, as tiktoken's Python reader does.
    test::TempDir dir;
    std::string crlf;
    for (std::size_t pos = 0; pos < base.size();) {
        const std::size_t eol = base.find('\n', pos);
        crlf += base.substr(pos, eol - pos) + "\r\n\n";
        pos = eol + 1;
    }
    EXPECT_EQ(load_tokenizer(dir.write("tokenizer.model", crlf))->vocab_size(), 512);
    // A blank first line makes the file start with 0x0A, a SentencePiece protobuf's first byte: still a rank file.
    EXPECT_EQ(load_tokenizer(dir.write("tokenizer.model", "\n" + base))->kind(), "tiktoken-llama3");
}

TEST(TiktokenTokenizerBadInput, EverySingleByteMustBeAToken) {
    std::string text;
    for (int b = 0; b < 256; ++b) {
        if (b != 0xC0)
            text += base64(std::string(1, static_cast<char>(b))) + " " + std::to_string(b - (b > 0xC0)) + "\n";
    }
    EXPECT_NE(tiktoken_load_error(text).find("no rank for the single byte 0xC0"), std::string::npos);
}

/// An added_tokens_decoder with Meta's 256 special tokens from id `first`.
nlohmann::json meta_decoder(int first) {
    nlohmann::json decoder = nlohmann::json::object();
    const std::vector<std::string> meta = TiktokenTokenizer::llama3_special_tokens();
    for (int i = 0; i < 256; ++i) decoder[std::to_string(first + i)] = {{"content", meta[i]}};
    return decoder;
}

TEST(TiktokenTokenizerBadInput, ConfigMustAgreeWithTheLayout) {
    // A rank file of 256 ranks: the special tokens are 256..511 (the real file's 128000..128255 are tested below).
    const std::string ranks = rank_file();
    const std::string outside = tiktoken_load_error(ranks, R"({"added_tokens_decoder": {"5": {"content": "<x>"}}})");
    EXPECT_NE(outside.find("added_tokens_decoder has 1 tokens with ids 5..5, expected the 256 special tokens of the "
                           "Llama 3 family at ids 256..511 (after the 256 ranks of "),
              std::string::npos)
        << outside;
    nlohmann::json decoder = meta_decoder(256);
    decoder["265"]["content"] = "<|eom_id|>";  // where <|eot_id|> belongs
    const std::string moved = tiktoken_load_error(ranks, nlohmann::json{{"added_tokens_decoder", decoder}}.dump());
    EXPECT_NE(moved.find("added_tokens_decoder['265'] is '<|eom_id|>', but Meta's Llama 3 tokenizer has "
                         "'<|eot_id|>' there"),
              std::string::npos)
        << moved;
    decoder = meta_decoder(256);
    decoder["300"]["content"] = "<|begin_of_text|>";
    EXPECT_NE(tiktoken_load_error(ranks, nlohmann::json{{"added_tokens_decoder", decoder}}.dump())
                  .find("special token 300 '<|begin_of_text|>' is also token 256"),
              std::string::npos);
    EXPECT_NE(tiktoken_load_error(ranks, R"({"eos_token": "<|im_end|>"})")
                  .find("eos_token '<|im_end|>' is not one of the special tokens"),
              std::string::npos);
    EXPECT_NE(tiktoken_load_error(ranks, R"({"added_tokens_decoder": {"0256": {"content": "<x>"}}})")
                  .find("added_tokens_decoder key '0256' is not a token id"),
              std::string::npos);
    EXPECT_NE(tiktoken_load_error(ranks, R"({"added_tokens_decoder": {"256": {"special": true}}})")
                  .find("added_tokens_decoder['256'] must be an object with a non-empty string 'content'"),
              std::string::npos);
    EXPECT_NE(tiktoken_load_error(ranks, R"({"add_bos_token": "yes"})")
                  .find("add_bos_token = \"yes\" must be true, false or null"),
              std::string::npos);
}

TEST(TiktokenTokenizer, Llama31ConfigIsTakenAsItIs) {
    // Llama 3.1 renamed reserved tokens (128008 <|eom_id|>, 128010 <|python_tag|>) in the same rank file: with its
    // tokenizer_config.json beside the file, the config's names count.
    nlohmann::json decoder = meta_decoder(128000);
    decoder["128008"]["content"] = "<|eom_id|>";
    decoder["128010"]["content"] = "<|python_tag|>";
    test::TempDir dir;
    const auto path = dir.write("tokenizer.model", read_file(kLlama3Model));
    const auto config = dir.write(
        "tokenizer_config.json",
        nlohmann::json{{"added_tokens_decoder", decoder}, {"eos_token", "<|eom_id|>"}, {"add_bos_token", true}}.dump());
    const auto tok = load_tokenizer(path);
    const std::vector<int32_t> ids = tok->encode("<|python_tag|><|reserved_special_token_5|>");
    ASSERT_GT(ids.size(), 2u);
    EXPECT_EQ(ids[0], 128010);
    // <|reserved_special_token_5|> is no longer a special token, so it is plain text.
    for (std::size_t i = 1; i < ids.size(); ++i) EXPECT_LT(ids[i], 128000) << i;
    EXPECT_EQ(tok->eos_id(), 128008);
    EXPECT_EQ(tok->adds_bos_token(), std::optional<bool>(true));
    EXPECT_EQ(tok->config_file(), config);
}

}  // namespace
}  // namespace kascade
