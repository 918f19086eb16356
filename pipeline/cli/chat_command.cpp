// kascade chat: print the prompt a model's chat template makes of a conversation, exactly as the model is given it.
#include <cstdio>
#include <optional>

#include <fmt/ranges.h>

#include "base/error.h"
#include "io/tokenizer/tokenizer_config.h"
#include "pipeline/cli/commands.h"
#include "pipeline/tasks/chat_messages.h"
#include "pipeline/tasks/chat_template_recognition.h"

namespace kascade::cli {

namespace {
struct ChatArgs {
    std::string tokenizer_config;
    std::string messages;
    std::optional<std::string> chat_template;
    bool add_generation_prompt = false;
};

void run_chat(const ChatArgs& args) {
    std::optional<ChatTemplate> named;
    if (args.chat_template) {
        try {
            named = parse_mode<ChatTemplate>(*args.chat_template, kChatTemplateOption);
        } catch (const Error& e) {  // a mistyped name is a mistake in the command line
            throw UsageError(e.what());
        }
    }
    const TokenizerConfig config =
        read_tokenizer_config_file(args.tokenizer_config, /*with_added_tokens=*/false, /*with_chat_template=*/true);
    const std::vector<ChatMessage> messages = read_chat_messages(args.messages);
    const ChatTemplateChoice choice = choose_chat_template(named, config);
    std::string prompt;
    try {
        prompt = render_chat(choice.family, choice.tokens, messages, args.add_generation_prompt);
    } catch (const Error& e) {  // a conversation the template refuses: name the file it came from
        throw Error(fmt::format("{}: {}", args.messages, e.what()));
    }
    // The bytes as they are: no newline added, so that the output is the model's input.
    KASCADE_CHECK(std::fwrite(prompt.data(), 1, prompt.size(), stdout) == prompt.size() && std::fflush(stdout) == 0,
                  "cannot write the prompt to standard output");
}
}  // namespace

void register_chat_command(CLI::App& app) {
    auto args = std::make_shared<ChatArgs>();
    CLI::App* cmd = app.add_subcommand("chat", "Print the prompt a chat template makes of a conversation");
    cmd->footer(
        "The prompt is printed as is, without a newline after it. The template is the family recognised in the\n"
        "config's chat_template (or the chat_template.jinja beside it), or the one --chat-template names; a config\n"
        "without a chat template gives the messages' text as is, like --chat-template none.\n"
        "Examples:\n"
        "  kascade chat --tokenizer-config Llama-3.1-8B-Instruct/tokenizer_config.json --messages chat.json "
        "--add-generation-prompt\n"
        "  kascade chat --tokenizer-config tokenizer_config.json --messages chat.json --chat-template chatml");
    cmd->add_option("--tokenizer-config", args->tokenizer_config,
                    "the model's tokenizer_config.json (chat_template, bos_token, eos_token)")
        ->required();
    cmd->add_option("--messages", args->messages,
                    "JSON array of {\"role\": \"system\"|\"user\"|\"assistant\", \"content\": \"...\"}")
        ->required();
    cmd->add_flag("--add-generation-prompt", args->add_generation_prompt,
                  "end with the header of the assistant's turn, where the model's answer starts");
    cmd->add_option(
        "--chat-template", args->chat_template,
        "template family instead of the config's: " + fmt::format("{}", fmt::join(mode_names<ChatTemplate>(), ", ")) +
            " (none: the messages' contents concatenated, nothing added)");
    cmd->callback([args] { run_chat(*args); });
}

}  // namespace kascade::cli
