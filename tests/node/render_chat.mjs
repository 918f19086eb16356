// tests/node/render_chat.mjs: renders conversations with real chat templates through the independent JavaScript
// Jinja implementation @huggingface/jinja, so that tests/tasks can cross-check kascade's C++ renderers.
//
// usage: node render_chat.mjs <cases.json>
// cases.json: an array of {"chat_template", "bos_token", "eos_token", "messages", "add_generation_prompt",
// "date_string", optional "enable_thinking"} objects. Prints a JSON array with, per case, {"text": rendered} or
// {"error": message} (a template that raises an exception). The variables are the ones transformers'
// apply_chat_template passes; date_string is pinned (Llama 3.1 / 3.2 templates would otherwise take today's date
// through strftime_now).
import { readFileSync } from "node:fs";
import { Template } from "@huggingface/jinja";

if (process.argv.length !== 3) {
    console.error("usage: node render_chat.mjs <cases.json>");
    process.exit(2);
}
const cases = JSON.parse(readFileSync(process.argv[2], "utf8"));
const results = cases.map((c) => {
    try {
        const text = new Template(c.chat_template).render({
            messages: c.messages,
            bos_token: c.bos_token ?? "",
            eos_token: c.eos_token ?? "",
            add_generation_prompt: c.add_generation_prompt,
            date_string: c.date_string,
            // Left undefined unless the case sets it, as transformers leaves a variable the caller does not pass.
            ...(c.enable_thinking === undefined ? {} : { enable_thinking: c.enable_thinking }),
        });
        return { text };
    } catch (e) {
        return { error: String(e.message ?? e) };
    }
});
process.stdout.write(JSON.stringify(results) + "\n");
