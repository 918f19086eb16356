// tests/node/tiktoken_encode.mjs: prints the token ids of a text file as a JSON array, computed by the npm package
// tiktoken (OpenAI's Rust tiktoken compiled to WebAssembly) set up as Meta's llama3 tokenizer.py sets it up, so that
// tests/tokenizer can cross-check kascade's reading of a Llama 3 tokenizer.model.
//
// usage: node tiktoken_encode.mjs <tokenizer.model> <text file>
// The ranks come from the file; the split pattern and the 256 special tokens after the last rank are transcribed
// here from Meta's tokenizer.py. Special tokens in the text are recognised (allowed_special "all"); no BOS/EOS is
// added, as kascade's Tokenizer::encode() adds none.
import { readFileSync } from "node:fs";
import { Tiktoken } from "tiktoken";

if (process.argv.length !== 4) {
    console.error("usage: node tiktoken_encode.mjs <tokenizer.model> <text file>");
    process.exit(2);
}
const ranks = readFileSync(process.argv[2], "utf8");
const text = readFileSync(process.argv[3], "utf8");

const pattern =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|" +
    "\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
const num_base_tokens = ranks.split("\n").filter((line) => line.length > 0).length;
const num_reserved_special_tokens = 256;
const names = [
    "<|begin_of_text|>",
    "<|end_of_text|>",
    "<|reserved_special_token_0|>",
    "<|reserved_special_token_1|>",
    "<|reserved_special_token_2|>",
    "<|reserved_special_token_3|>",
    "<|start_header_id|>",
    "<|end_header_id|>",
    "<|reserved_special_token_4|>",
    "<|eot_id|>",
];
for (let i = 5; i < num_reserved_special_tokens - 5; i++) names.push(`<|reserved_special_token_${i}|>`);
const special_tokens = Object.fromEntries(names.map((name, i) => [name, num_base_tokens + i]));

const encoding = new Tiktoken(ranks, special_tokens, pattern);
const ids = encoding.encode(text, "all");
encoding.free();
process.stdout.write(JSON.stringify(Array.from(ids)) + "\n");
