// tests/tasks/test_chat_template.cpp: kascade's C++ chat templates against the real chat_template of each family
// (tests/fixtures/chat-templates) rendered by an independent Jinja implementation, npm @huggingface/jinja run under
// node (tests/node/render_chat.mjs), byte for byte; recognition of each real template and refusal of others; the
// messages file; the `kascade chat` command against hand-derived output.
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <optional>

#include <nlohmann/json.hpp>

#include "base/error.h"
#include "cli/run_command.h"
#include "common/error_of.h"
#include "common/temp_dir.h"
#include "io/file_util.h"
#include "io/tokenizer/tokenizer_config.h"
#include "pipeline/tasks/chat_messages.h"
#include "pipeline/tasks/chat_template.h"
#include "pipeline/tasks/chat_template_recognition.h"

using namespace kascade;
using nlohmann::json;

namespace {

using test::error_of;

const std::filesystem::path kFixtures = std::filesystem::path(KASCADE_SOURCE_DIR) / "tests/fixtures/chat-templates";
const std::filesystem::path kNodeProject = std::filesystem::path(KASCADE_SOURCE_DIR) / "tests/node";

/// Each real template and the family it is.
const std::map<std::string, ChatTemplate> kFixtureFamilies = {
    {"llama-3", ChatTemplate::Llama3}, {"llama-3.1", ChatTemplate::Llama31}, {"llama-3.2", ChatTemplate::Llama31},
    {"chatml", ChatTemplate::ChatML},  {"qwen2.5", ChatTemplate::Qwen25},    {"qwen2.5-0.5b", ChatTemplate::Qwen25},
    {"qwen3", ChatTemplate::Qwen3},    {"smollm2", ChatTemplate::SmolLM2},   {"mistral", ChatTemplate::Mistral},
    {"llama-2", ChatTemplate::Llama2}, {"zephyr", ChatTemplate::Zephyr},     {"phi-3", ChatTemplate::Phi3},
};

TokenizerConfig fixture(const std::string& name) {
    return read_tokenizer_config_file(kFixtures / (name + ".json"), false, true);
}

ChatMessage sys(std::string c) {
    return {ChatRole::System, std::move(c)};
}
ChatMessage user(std::string c) {
    return {ChatRole::User, std::move(c)};
}
ChatMessage assistant(std::string c) {
    return {ChatRole::Assistant, std::move(c)};
}

/// The conversations every family is rendered with (those its template refuses are refused by both).
const std::vector<std::pair<std::string, std::vector<ChatMessage>>>& conversations() {
    static const std::vector<std::pair<std::string, std::vector<ChatMessage>>> list = {
        {"user only", {user("What is the capital of France?")}},
        {"system and user", {sys("You are a terse assistant."), user("What is the capital of France?")}},
        {"multi-turn",
         {user("Hello, how are you?"), assistant("I'm doing great. How can I help you today?"),
          user("I'd like to show off how chat templating works!")}},
        {"system and multi-turn",
         {sys("You are a friendly chatbot who always responds in the style of a pirate"), user("Hi"),
          assistant("Arr, hello!"), user("Tell me a joke.")}},
        // Blanks and newlines at the ends of every turn, which Llama 3 trims and Llama 2 strips; U+00A0 and U+3000
        // are whitespace to both Python and JavaScript (U+FEFF, U+001C-U+001F and U+0085 are not: see README).
        {"padded turns",
         {sys("  You are helpful.\n\n"), user("\n\t Hello \xc2\xa0"), assistant("  Hi there   "),
          user("\xe3\x80\x80Who are you?\n")}},
        // Text that looks like template syntax or special tokens, quotes, backslashes, non-ASCII, an empty turn.
        {"template-like text",
         {user("{{ messages }} {% if x %}'\"\\n\\\\ <|im_end|> [INST] </s> 日本語 \xf0\x9f\x98\x80"), assistant(""),
          user("last")}},
        // Qwen3's reasoning: kept in a <think> block after the last user turn, dropped before it.
        {"reasoning",
         {user("2+2?"), assistant("<think>\nAdd them.\n</think>\n\n4"), user("And 3+3?"),
          assistant("<think>\n\nAdd again.\n\n</think>\n\n\n6")}},
        {"reasoning, last turn without think",
         {user("2+2?"), assistant("<think>\nx\n</think>\n4"), user("3+3?"), assistant("6")}},
        {"system later", {user("Hi"), assistant("Hello"), sys("Be brief."), user("Bye")}},
        // Where Llama 2's template expects an assistant turn, a system turn is rendered as nothing.
        {"system second", {user("Hi"), sys("Be brief."), user("Bye")}},
    };
    return list;
}

json messages_json(const std::vector<ChatMessage>& messages) {
    json out = json::array();
    for (const ChatMessage& m : messages) out.push_back({{"role", mode_name(m.role)}, {"content", m.content}});
    return out;
}

std::string node_reference_missing() {
    if (std::system("node --version > /dev/null 2>&1") != 0) return "node is not on PATH";
    if (!std::filesystem::exists(kNodeProject / "node_modules" / "@huggingface" / "jinja")) {
        return "the node project is not installed (run: cd tests/node && npm ci)";
    }
    return {};
}

bool references_required() {
    const char* required = std::getenv("KASCADE_REQUIRE_NODE_REFERENCE");
    return required && std::string(required) == "1";
}

TEST(ChatTemplateReference, EveryFamilyRendersAsTheRealTemplateUnderJinja) {
    if (const std::string missing = node_reference_missing(); !missing.empty()) {
        if (references_required()) FAIL() << "KASCADE_REQUIRE_NODE_REFERENCE=1 but " << missing;
        GTEST_SKIP() << "JavaScript Jinja reference unavailable: " << missing;
    }
    struct Case {
        std::string fixture, conversation;
        bool generation;
        std::string ours;  ///< kascade's rendering, or "" with refused set
        bool refused = false;
    };
    std::vector<Case> cases;
    json inputs = json::array();
    // Each fixture as the family recognised in it, and Qwen3's also as qwen3-no-thinking against its template
    // rendered with enable_thinking=false.
    struct Rendering {
        std::string fixture;
        ChatTemplate family;
        std::optional<bool> enable_thinking;
    };
    std::vector<Rendering> renderings;
    for (const auto& [name, family] : kFixtureFamilies) {
        ASSERT_EQ(choose_chat_template(std::nullopt, fixture(name)).family, family) << name;
        renderings.push_back({name, family, std::nullopt});
    }
    renderings.push_back({"qwen3", ChatTemplate::Qwen3NoThinking, false});
    for (const Rendering& rendering : renderings) {
        const TokenizerConfig config = fixture(rendering.fixture);
        const ChatTemplateChoice choice = choose_chat_template(rendering.family, config);
        const std::string name = rendering.fixture + " as " + std::string(mode_name(rendering.family));
        for (const auto& [label, messages] : conversations()) {
            for (const bool generation : {false, true}) {
                Case c{name, label, generation, ""};
                try {
                    c.ours = render_chat(choice.family, choice.tokens, messages, generation);
                } catch (const Error&) {
                    c.refused = true;
                }
                cases.push_back(c);
                json input = {
                    {"chat_template", *config.chat_template}, {"bos_token", config.bos_token},
                    {"eos_token", config.eos_token},          {"messages", messages_json(messages)},
                    {"add_generation_prompt", generation},    {"date_string", std::string(kLlama31DateString)}};
                if (rendering.enable_thinking) input["enable_thinking"] = *rendering.enable_thinking;
                inputs.push_back(std::move(input));
            }
        }
    }
    test::TempDir dir("chat-template");
    const auto input_file = dir.write("cases.json", inputs.dump());
    const auto output_file = dir.path() / "rendered.json";
    const std::string command = "node " + shell_quote((kNodeProject / "render_chat.mjs").string()) + " " +
                                shell_quote(input_file.string()) + " > " + shell_quote(output_file.string());
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
    const json rendered = json::parse(read_file(output_file));
    ASSERT_EQ(rendered.size(), cases.size());
    int compared = 0, refused_by_both = 0;
    for (size_t i = 0; i < cases.size(); ++i) {
        const Case& c = cases[i];
        const json& r = rendered[i];
        const std::string where = c.fixture + ", " + c.conversation + (c.generation ? ", generation prompt" : "");
        if (c.refused) {
            // kascade refuses what the template raises an exception on, and the one conversation Llama 2's template
            // renders by silently dropping a turn (a system turn after the first).
            const bool dropped = c.fixture == "llama-2 as llama2" && c.conversation == "system second" &&
                                 r.contains("text") &&
                                 r["text"].get<std::string>().find("Be brief.") == std::string::npos;
            EXPECT_TRUE(r.contains("error") || dropped) << where << ": kascade refuses, jinja renders " << r.dump();
            ++refused_by_both;
            continue;
        }
        ASSERT_TRUE(r.contains("text")) << where << ": jinja refuses (" << r.dump() << "), kascade renders "
                                        << json(c.ours).dump();
        EXPECT_EQ(c.ours, r["text"].get<std::string>()) << where;
        ++compared;
    }
    std::printf("%d renderings equal to @huggingface/jinja's byte for byte, %d refused by both\n", compared,
                refused_by_both);
    EXPECT_GT(compared, 150);
}

TEST(ChatTemplateRecognition, EachRealTemplateIsItsFamily) {
    for (const auto& [name, family] : kFixtureFamilies) {
        const TokenizerConfig config = fixture(name);
        ASSERT_TRUE(config.chat_template.has_value()) << name;
        EXPECT_EQ(recognize_chat_template(*config.chat_template, name), family) << name;
    }
    // The Llama 3 template of the shared model folder, as a tokenizer_config.json beside a tokenizer file.
    const ChatTemplateChoice llama3 = choose_chat_template_for_model(
        std::nullopt, std::filesystem::path(KASCADE_SHARED_DIR) / "models/tokenizers/llama-3");
    EXPECT_EQ(llama3.family, ChatTemplate::Llama3);
    EXPECT_EQ(llama3.tokens.bos, "<|begin_of_text|>");
    EXPECT_EQ(llama3.tokens.eos, "<|eot_id|>");
}

TEST(ChatTemplateRecognition, WritingDifferencesDoNotMatter) {
    // The Llama 3 template with other quotes, blanks, whitespace control and escaped newlines is still Llama 3.
    const std::string rewritten =
        "{%- set loop_messages = messages -%}\n{%- for message in loop_messages -%}\n  {%- set content = "
        "\"<|start_header_id|>\"+message['role']+\"<|end_header_id|>\\n\\n\" + message['content']|trim + "
        "\"<|eot_id|>\" -%}\n  {%- if loop.index0 == 0 -%}{%- set content = bos_token + content -%}{%- endif -%}\n"
        "  {{- content -}}\n{%- endfor -%}\n{%- if add_generation_prompt -%}{{- "
        "\"<|start_header_id|>assistant<|end_header_id|>\\n\\n\" -}}{%- endif -%}\n";
    EXPECT_EQ(recognize_chat_template(rewritten, "rewritten"), ChatTemplate::Llama3);
}

TEST(ChatTemplateRecognition, OtherTemplatesAreRefusedNamingTheOption) {
    // google/gemma-7b-it's template (as llama.cpp's tests/test-chat-template.cpp keeps it): a family kascade lacks.
    const std::string gemma =
        "{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}{% endif %}{% for "
        "message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
        "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
        "(message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}{% "
        "endif %}{{ '<start_of_turn>' + role + '\\n' + message['content'] | trim + '<end_of_turn>\\n' }}{% endfor "
        "%}{% if add_generation_prompt %}{{'<start_of_turn>model\\n'}}{% endif %}";
    const std::string unknown = error_of([&] { recognize_chat_template(gemma, "gemma/tokenizer_config.json"); });
    EXPECT_NE(unknown.find("gemma/tokenizer_config.json: chat_template is none of"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("--chat-template NAME"), std::string::npos) << unknown;
    EXPECT_NE(unknown.find("--chat-template none"), std::string::npos) << unknown;

    // A fine-tune's SmolLM2 template with its own default system text is no longer SmolLM2's (nor plain ChatML).
    std::string smollm2 = *fixture("smollm2").chat_template;
    const size_t at = smollm2.find("named SmolLM");
    smollm2.replace(at, std::string("named SmolLM").size(), "named Tiny");
    EXPECT_NE(error_of([&] { recognize_chat_template(smollm2, "x"); }).find("none of"), std::string::npos);

    // Llama 3 without the trim of the content: the markers match, a transcribed tag is missing.
    std::string untrimmed = *fixture("llama-3").chat_template;
    untrimmed.replace(untrimmed.find(" | trim"), std::string(" | trim").size(), "");
    const std::string differs = error_of([&] { recognize_chat_template(untrimmed, "x.json"); });
    EXPECT_NE(differs.find("x.json: chat_template looks like the llama3 template but differs from it: it lacks"),
              std::string::npos)
        << differs;
    EXPECT_NE(differs.find("--chat-template NAME"), std::string::npos) << differs;

    // Mistral-7B-Instruct-v0.2's first template (llama.cpp's tests): no space after EOS, so not v0.1's.
    const std::string mistral02 =
        "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}{{ "
        "raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}{% if "
        "message['role'] == 'user' %}{{ '[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == "
        "'assistant' %}{{ message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant "
        "roles are supported!') }}{% endif %}{% endfor %}";
    EXPECT_NE(error_of([&] { recognize_chat_template(mistral02, "x"); }).find("looks like the mistral template"),
              std::string::npos);
}

TEST(ChatTemplate, NamesAndChoice) {
    for (const std::string& name : mode_names<ChatTemplate>()) {
        EXPECT_EQ(mode_name(parse_mode<ChatTemplate>(name, "--chat-template")), name);
    }
    const std::string typo = error_of([] { parse_mode<ChatTemplate>("lama3", "--chat-template"); });
    EXPECT_NE(typo.find("invalid --chat-template='lama3'"), std::string::npos) << typo;
    EXPECT_NE(typo.find("did you mean llama3?"), std::string::npos) << typo;

    // A name given wins over the config's template; no config or no chat template: none.
    EXPECT_EQ(choose_chat_template(ChatTemplate::ChatML, fixture("llama-3")).family, ChatTemplate::ChatML);
    EXPECT_EQ(choose_chat_template(std::nullopt, std::nullopt).family, ChatTemplate::None);
    test::TempDir dir("chat-choice");
    dir.write("tokenizer_config.json", R"({"bos_token": "<s>", "eos_token": "</s>"})");
    EXPECT_EQ(choose_chat_template_for_model(std::nullopt, dir.path()).family, ChatTemplate::None);
    EXPECT_EQ(choose_chat_template_for_model(std::nullopt, dir.path() / "missing").family, ChatTemplate::None);
    // The chat_template.jinja beside the config, as newer transformers versions save it.
    dir.write("chat_template.jinja", *fixture("zephyr").chat_template);
    const ChatTemplateChoice zephyr = choose_chat_template_for_model(std::nullopt, dir.path());
    EXPECT_EQ(zephyr.family, ChatTemplate::Zephyr);
    EXPECT_EQ(zephyr.tokens.eos, "</s>");
    // A list of named templates: the "default" one.
    dir.write(
        "tokenizer_config.json",
        json({{"chat_template", json::array({{{"name", "tool_use"}, {"template", "x"}},
                                             {{"name", "default"}, {"template", *fixture("phi-3").chat_template}}})}})
            .dump());
    EXPECT_EQ(choose_chat_template_for_model(std::nullopt, dir.path()).family, ChatTemplate::Phi3);
    dir.write("tokenizer_config.json", R"({"chat_template": [{"name": "rag", "template": "x"}]})");
    EXPECT_NE(error_of([&] {
                  choose_chat_template_for_model(std::nullopt, dir.path());
              }).find("chat_template lists no template named \"default\""),
              std::string::npos);
    dir.write("tokenizer_config.json", R"({"chat_template": 7})");
    EXPECT_NE(error_of([&] {
                  choose_chat_template_for_model(std::nullopt, dir.path());
              }).find("chat_template must be a string or a list"),
              std::string::npos);
}

TEST(ChatTemplate, NoneIsTheMessagesTextAsIs) {
    const std::vector<ChatMessage> messages = {sys("A "), user("B\n"), assistant(" C")};
    EXPECT_EQ(render_chat(ChatTemplate::None, {"<s>", "</s>"}, messages, true), "A B\n C");
    EXPECT_EQ(render_chat(ChatTemplate::None, {"<s>", "</s>"}, std::vector<ChatMessage>{user("x")}, false), "x");
}

TEST(ChatTemplate, BosIsWrittenByExactlyTheFamiliesThatSaySo) {
    for (const auto& [name, family] : kFixtureFamilies) {
        ChatTemplateChoice choice = choose_chat_template(std::nullopt, fixture(name));
        choice.tokens.bos = "<BOS>";  // a BOS for every family, so that "starts with it" means written by it
        const std::string rendered = render_chat(family, choice.tokens, std::vector<ChatMessage>{user("x")}, true);
        EXPECT_EQ(rendered.starts_with("<BOS>"), chat_template_writes_bos(family)) << name;
        EXPECT_EQ(rendered.find("<BOS>", 1), std::string::npos) << name;  // one user turn: no second BOS
    }
}

TEST(ChatTemplate, ConversationsATemplateRefusesAreRefusedNamingTheMessage) {
    const ChatSpecialTokens tokens{"<s>", "</s>"};
    const std::string mistral = error_of([&] {
        render_chat(ChatTemplate::Mistral, tokens, std::vector<ChatMessage>{sys("s"), user("u")}, true);
    });
    EXPECT_NE(mistral.find("chat template 'mistral': messages[0] (role system): expected user"), std::string::npos)
        << mistral;
    const std::string llama2 = error_of([&] {
        render_chat(ChatTemplate::Llama2, tokens, std::vector<ChatMessage>{user("u"), assistant("a"), sys("s")}, true);
    });
    EXPECT_NE(llama2.find("messages[2] (role system): expected user"), std::string::npos) << llama2;
    EXPECT_NE(error_of([&] {
                  render_chat(ChatTemplate::Llama2, tokens, std::vector<ChatMessage>{sys("s")}, true);
              }).find("needs a user turn after it"),
              std::string::npos);
    EXPECT_NE(error_of([&] {
                  render_chat(ChatTemplate::ChatML, tokens, std::vector<ChatMessage>{}, true);
              }).find("has no messages"),
              std::string::npos);
}

TEST(ChatMessages, BadFilesAreRefusedNamingTheElement) {
    const auto check = [](std::string_view text, std::string_view expected) {
        const std::string e = error_of([&] { parse_chat_messages(text, "m.json"); });
        EXPECT_NE(e.find(expected), std::string::npos) << text << " -> " << e;
    };
    check("[{\"role\": \"user\"", "m.json: not valid JSON");
    check("{\"role\": \"user\", \"content\": \"x\"}",
          "m.json: expected a JSON array of {\"role\", \"content\"} objects, found object");
    check("[]", "m.json: the array of messages is empty");
    check("[\"hello\"]", "m.json: [0] must be an object with \"role\" and \"content\", found string");
    check("[{\"role\": \"user\", \"content\": \"x\"}, {\"role\": \"usr\", \"content\": \"y\"}]",
          "invalid m.json: [1].role='usr' (expected system, user, assistant); did you mean user?");
    check("[{\"role\": \"tool\", \"content\": \"y\"}]", "[0].role='tool'");
    check("[{\"role\": \"user\"}]", "m.json: [0] needs a string \"content\", found none");
    check("[{\"role\": \"user\", \"content\": null}]", "m.json: [0] needs a string \"content\", found null");
    check("[{\"content\": \"x\"}]", "m.json: [0] needs a string \"role\"");
    check("[{\"role\": \"assistant\", \"content\": \"x\", \"tool_calls\": []}]",
          "m.json: [0] has the key \"tool_calls\"");
    check("[{\"role\": \"user\", \"content\": \"\xff\"}]", "m.json: not valid JSON");
    const std::vector<ChatMessage> ok =
        parse_chat_messages(R"([{"role": "system", "content": "s"}, {"content": "u\n", "role": "user"}])", "m.json");
    ASSERT_EQ(ok.size(), 2u);
    EXPECT_EQ(ok[0].role, ChatRole::System);
    EXPECT_EQ(ok[1].role, ChatRole::User);
    EXPECT_EQ(ok[1].content, "u\n");
}

TEST(ChatCommand, PrintsTheRenderedPromptExactly) {
    TempDir dir("chat-cli");
    const auto messages = dir.write("chat.json", R"([{"role": "user", "content": "Hi!"}])");
    const std::string config = (kFixtures / "smollm2.json").string();
    // Hand-derived from SmolLM2's template: its default system turn, the user turn, the assistant header; nothing
    // after it.
    const CommandResult r = run_kascade("chat --tokenizer-config " + shell_quote(config) + " --messages " +
                                        shell_quote(messages.string()) + " --add-generation-prompt");
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_EQ(r.out,
              "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
              "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n");
    const CommandResult phi = run_kascade("chat --tokenizer-config " + shell_quote(config) + " --messages " +
                                          shell_quote(messages.string()) + " --chat-template phi3");
    EXPECT_EQ(phi.out, "<|user|>\nHi!<|end|>\n<|im_end|>");  // Phi-3's layout, SmolLM2's EOS (<|im_end|>)
    const CommandResult none = run_kascade("chat --tokenizer-config " + shell_quote(config) + " --messages " +
                                           shell_quote(messages.string()) + " --chat-template none");
    EXPECT_EQ(none.out, "Hi!");
    // Qwen3 with thinking switched off, hand-derived from its template's last lines: the assistant header, then an
    // empty <think> block.
    const std::string qwen3 = (kFixtures / "qwen3.json").string();
    const CommandResult no_thinking =
        run_kascade("chat --tokenizer-config " + shell_quote(qwen3) + " --messages " + shell_quote(messages.string()) +
                    " --add-generation-prompt --chat-template qwen3-no-thinking");
    EXPECT_EQ(no_thinking.exit_code, 0) << no_thinking.err;
    EXPECT_EQ(no_thinking.out, "<|im_start|>user\nHi!<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n");
}

TEST(ChatCommand, BadInputIsOneLineWithTheRightExitCode) {
    TempDir dir("chat-cli-bad");
    const std::string config = shell_quote((kFixtures / "mistral.json").string());
    const auto system_first =
        dir.write("sys.json", R"([{"role": "system", "content": "s"}, {"role": "user", "content": "u"}])");
    CommandResult r =
        run_kascade("chat --tokenizer-config " + config + " --messages " + shell_quote(system_first.string()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_EQ(r.err,
              "kascade: error: " + system_first.string() +
                  ": chat template 'mistral': messages[0] (role system): expected user: Mistral's template takes "
                  "only user and assistant turns, alternating from a user turn (it raises an exception "
                  "otherwise; put a system text into the first user turn)\n");
    r = run_kascade("chat --tokenizer-config " + config + " --messages " + shell_quote(system_first.string()) +
                    " --chat-template mistrel");
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("kascade: error: invalid --chat-template='mistrel'"), std::string::npos) << r.err;
    EXPECT_NE(r.err.find("did you mean mistral?"), std::string::npos) << r.err;
    const auto not_json = dir.write("bad.json", "role: user");
    r = run_kascade("chat --tokenizer-config " + config + " --messages " + shell_quote(not_json.string()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_TRUE(r.err.starts_with("kascade: error: " + not_json.string() + ": not valid JSON")) << r.err;
    const auto unknown = dir.write("tokenizer_config.json", R"({"chat_template": "{{ messages }}"})");
    r = run_kascade("chat --tokenizer-config " + shell_quote(unknown.string()) + " --messages " +
                    shell_quote(system_first.string()));
    EXPECT_EQ(r.exit_code, 1);
    EXPECT_NE(r.err.find(unknown.string() + ": chat_template is none of"), std::string::npos) << r.err;
    r = run_kascade("chat --messages " + shell_quote(system_first.string()));
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find("--tokenizer-config is required"), std::string::npos) << r.err;
    for (const CommandResult& each : {r}) EXPECT_EQ(std::count(each.err.begin(), each.err.end(), '\n'), 1);
}

}  // namespace
