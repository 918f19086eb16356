// io/tokenizer/added_vocabulary.cpp: leftmost-longest matching of added tokens.
#include "io/tokenizer/added_vocabulary.h"

#include <algorithm>

namespace kascade {

namespace {

bool is_space(char c) {
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f';
}

}  // namespace

void AddedVocabulary::add(std::string content, int32_t id, bool lstrip, bool rstrip) {
    if (content.empty()) return;
    auto& bucket = by_first_byte_[static_cast<unsigned char>(content[0])];
    tokens_.push_back({std::move(content), id, lstrip, rstrip});
    bucket.push_back(tokens_.size() - 1);
    std::stable_sort(bucket.begin(), bucket.end(), [this](std::size_t a, std::size_t b) {
        return tokens_[a].content.size() > tokens_[b].content.size();
    });
}

std::vector<AddedVocabulary::Segment> AddedVocabulary::split(std::string_view text) const {
    std::vector<Segment> segments;
    std::size_t plain_begin = 0;
    std::size_t pos = 0;
    while (pos < text.size()) {
        const Token* found = nullptr;
        for (const std::size_t index : by_first_byte_[static_cast<unsigned char>(text[pos])]) {
            if (text.substr(pos).starts_with(tokens_[index].content)) {
                found = &tokens_[index];
                break;
            }
        }
        if (!found) {
            ++pos;
            continue;
        }
        std::size_t begin = pos;
        std::size_t end = pos + found->content.size();
        if (found->lstrip) {
            while (begin > plain_begin && is_space(text[begin - 1])) --begin;
        }
        if (found->rstrip) {
            while (end < text.size() && is_space(text[end])) ++end;
        }
        if (begin > plain_begin) segments.push_back({text.substr(plain_begin, begin - plain_begin), -1});
        segments.push_back({text.substr(begin, end - begin), found->id});
        plain_begin = pos = end;
    }
    if (plain_begin < text.size()) segments.push_back({text.substr(plain_begin), -1});
    return segments;
}

}  // namespace kascade
