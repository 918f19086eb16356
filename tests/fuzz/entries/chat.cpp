// The chat fuzz targets: a JSON messages file (read_chat_messages) rendered with every chat template family, and a
// chat_template text (recognize_chat_template), with the promises each makes.
#include <fmt/format.h>

#include "base/error.h"
#include "entries/fuzz_support.h"
#include "pipeline/tasks/chat_messages.h"
#include "pipeline/tasks/chat_template_recognition.h"

namespace kascade::fuzz {

bool fuzz_chat_messages(FuzzInput input) {
    std::vector<ChatMessage> messages;
    try {
        messages = read_chat_messages(write_input_file("messages.json", input));
    } catch (const kascade::Error&) {
        return false;
    }
    require(!messages.empty(), "an empty conversation was accepted");
    for (const std::string& name : mode_names<ChatTemplate>()) {
        const ChatTemplate family = parse_mode<ChatTemplate>(name, "fuzz");
        try {
            const std::string prompt = render_chat(family, {"<s>", "</s>"}, messages, true);
            // Every family but none writes markup around the turns; none writes exactly the contents.
            size_t content_bytes = 0;
            for (const ChatMessage& m : messages) content_bytes += m.content.size();
            require(family == ChatTemplate::None ? prompt.size() == content_bytes : !prompt.empty(),
                    fmt::format("{} rendered {} bytes from {} bytes of content", name, prompt.size(), content_bytes));
            require(!chat_template_writes_bos(family) || prompt.starts_with("<s>"),
                    fmt::format("{} says it writes BOS but its prompt does not start with it", name));
        } catch (const kascade::Error&) {
            // Mistral's and Llama 2's templates refuse some conversations.
            require(family == ChatTemplate::Mistral || family == ChatTemplate::Llama2,
                    fmt::format("{} refused a conversation", name));
        }
    }
    return true;
}

bool fuzz_chat_template(FuzzInput input) {
    const std::string text(reinterpret_cast<const char*>(input.data()), input.size());
    try {
        static_cast<void>(mode_name(recognize_chat_template(text, "fuzz")));
    } catch (const kascade::Error&) {
        return false;
    }
    return true;
}

}  // namespace kascade::fuzz
