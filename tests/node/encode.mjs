// tests/node/encode.mjs: prints the token ids of a text file as a JSON array, computed by the independent
// JavaScript implementation @huggingface/tokenizers, so that tests/tokenizer can cross-check kascade's ids.
//
// usage: node encode.mjs <tokenizer.json> <text file>
// No BOS/EOS or other post-processing is added: kascade's Tokenizer::encode() returns the bare ids too.
import { readFileSync } from "node:fs";
import { Tokenizer } from "@huggingface/tokenizers";

if (process.argv.length !== 4) {
    console.error("usage: node encode.mjs <tokenizer.json> <text file>");
    process.exit(2);
}
const tokenizer_json = JSON.parse(readFileSync(process.argv[2], "utf8"));
const text = readFileSync(process.argv[3], "utf8");
// The second argument is tokenizer_config.json; none is needed for encoding without special-token templates.
const tokenizer = new Tokenizer(tokenizer_json, {});
const { ids } = tokenizer.encode(text, { add_special_tokens: false });
process.stdout.write(JSON.stringify(ids) + "\n");
