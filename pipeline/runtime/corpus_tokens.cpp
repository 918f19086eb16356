#include "pipeline/runtime/corpus_tokens.h"

namespace kascade {

namespace {

std::string_view strip(std::string_view s) {
    const auto is_space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; };
    while (!s.empty() && is_space(s.front())) s.remove_prefix(1);
    while (!s.empty() && is_space(s.back())) s.remove_suffix(1);
    return s;
}

/// The documents of `text`: the stretches between lines that are exactly the separator (ignoring \r and spaces).
std::vector<std::string_view> split_documents(std::string_view text) {
    std::vector<std::string_view> documents;
    size_t doc_begin = 0, line_begin = 0;
    while (line_begin <= text.size()) {
        size_t line_end = text.find('\n', line_begin);
        if (line_end == std::string_view::npos) line_end = text.size();
        if (strip(text.substr(line_begin, line_end - line_begin)) == kDocumentSeparatorLine) {
            documents.push_back(text.substr(doc_begin, line_begin - doc_begin));
            doc_begin = line_end + 1;
        }
        line_begin = line_end + 1;
    }
    if (doc_begin < text.size()) documents.push_back(text.substr(doc_begin));
    return documents;
}

}  // namespace

std::vector<int32_t> tokenize_corpus(const Tokenizer& tokenizer, std::string_view text, int32_t boundary_token) {
    const std::vector<std::string_view> documents = split_documents(text);
    if (boundary_token < 0 || documents.size() <= 1) return tokenizer.encode(text);
    std::vector<int32_t> tokens;
    bool first = true;
    for (std::string_view document : documents) {
        document = strip(document);
        if (document.empty()) continue;
        // The stream starts with a document; perplexity windows add BOS in front of each window themselves.
        if (!first) tokens.push_back(boundary_token);
        first = false;
        const std::vector<int32_t> ids = tokenizer.encode(document);
        tokens.insert(tokens.end(), ids.begin(), ids.end());
    }
    return tokens;
}

}  // namespace kascade
