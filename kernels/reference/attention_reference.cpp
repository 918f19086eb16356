// kernels/reference/attention_reference.cpp: plain loops in double, no tiling, no SIMD, no threads.
#include "kernels/reference/attention_reference.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>

namespace kascade::reference {
namespace {

double score(const AttnShape& s, const float* q, const float* k, int h, int i, int j) {
    const int kvh = h / s.group_size();
    const float* qr = q + (static_cast<int64_t>(i) * s.n_q_heads + h) * s.head_dim;
    const float* kr = k + (static_cast<int64_t>(kvh) * s.kv_stride + j) * s.head_dim;
    double dot = 0;
    for (int p = 0; p < s.head_dim; ++p) dot += static_cast<double>(qr[p]) * kr[p];
    return dot * s.scale;
}

int position(const AttnShape& s, int i) {
    return s.n_k - s.n_q + i;
}

// The mask of attention_types.h: causal, and with a window w > 0 also j > p - w (Hugging Face's sliding window).
bool visible(const AttnShape& s, int i, int j) {
    const int p = position(s, i);
    return j <= p && (s.window == 0 || j > p - s.window);
}

// Probabilities of one row over keys 0..position (double softmax over the visible keys, 0 for the others).
std::vector<double> visible_row(const AttnShape& s, const float* q, const float* k, int h, int i) {
    const int n = position(s, i) + 1;
    std::vector<double> p(n, 0.0);
    double mx = -std::numeric_limits<double>::infinity();
    for (int j = 0; j < n; ++j)
        if (visible(s, i, j)) mx = std::max(mx, p[j] = score(s, q, k, h, i, j));
    double sum = 0;
    for (int j = 0; j < n; ++j)
        if (visible(s, i, j)) sum += p[j] = std::exp(p[j] - mx);
    for (double& x : p) x /= sum;
    return p;
}

// Whether key tile kt holds a key visible to some query of query tile qt (prefill: positions qt*tile ..).
bool tile_in_window(int qt, int kt, int tile, int window) {
    for (int p = qt * tile; p < (qt + 1) * tile; ++p)
        for (int j = kt * tile; j < (kt + 1) * tile; ++j)
            if (j <= p && (window == 0 || j > p - window)) return true;
    return false;
}

bool in_list(const int32_t* list, int count, int t) {
    return std::find(list, list + count, t) != list + count;
}

// The rule's k in tokens, case by case as attention_types.h words it, before granularity and candidates.
int64_t rule_tokens(const TopKRule& rule, int q_tile, int tile, int n_keys, int window) {
    int64_t k = 0;
    if (rule.tiles > 0) {
        k = static_cast<int64_t>(rule.tiles) * tile;
    } else if (rule.pct > 0) {
        int64_t context = 0;
        if (rule.k_rule == KRule::Sequence) context = n_keys;
        if (rule.k_rule == KRule::Rolling) context = static_cast<int64_t>(q_tile) * tile;
        if (rule.k_rule == KRule::Visible) context = static_cast<int64_t>(q_tile + 1) * tile;
        if (window > 0 && window < context) context = window;
        k = static_cast<int64_t>(std::floor(static_cast<double>(rule.pct) * context / 100.0));
        if (k < rule.k_min_tokens) k = rule.k_min_tokens;
        if (rule.k_rule == KRule::Sequence) {
            if (k > context) k = context;
            k -= tile;
        }
    }
    if (rule.round_k > 0)
        while (k % rule.round_k != 0) ++k;
    return k < 0 ? 0 : k;
}

// Probability rows of every query head of a KV head's group and of the rows of query tile qt, pooled per key by sum
// (or, for kMax, the max raw score over the rows that see the key).
template <bool kMax>
std::vector<double> token_pool(const AttnShape& s, int tile, const float* q, const float* k) {
    const int nqt = tile_count(s.n_q, tile);
    const double none = kMax ? -std::numeric_limits<double>::infinity() : 0.0;
    std::vector<double> mass(static_cast<size_t>(s.n_kv_heads) * nqt * s.n_k, none);
    for (int h = 0; h < s.n_q_heads; ++h) {
        const int kvh = h / s.group_size();
        for (int i = 0; i < s.n_q; ++i) {
            const int qt = i / tile;
            double* row = mass.data() + (static_cast<size_t>(kvh) * nqt + qt) * s.n_k;
            const std::vector<double> p = visible_row(s, q, k, h, i);
            for (int j : candidate_keys(qt, tile, s.window)) {
                if (!visible(s, i, j)) continue;
                row[j] = kMax ? std::max(row[j], score(s, q, k, h, i, j)) : row[j] + p[j];
            }
        }
    }
    for (double& x : mass)
        if (x == none) x = 0;
    return mass;
}

}  // namespace

std::vector<double> masked_attention(const AttnShape& s, const float* q, const float* k, const float* v,
                                     const KeyPredicate& allowed, std::vector<double>* lse) {
    const int d = s.head_dim;
    std::vector<double> out(static_cast<size_t>(s.n_q) * s.n_q_heads * d, 0.0);
    if (lse != nullptr) lse->assign(static_cast<size_t>(s.n_q_heads) * s.n_q, 0.0);
    for (int h = 0; h < s.n_q_heads; ++h) {
        const int kvh = h / s.group_size();
        for (int i = 0; i < s.n_q; ++i) {
            std::vector<int> keys;
            for (int j = 0; j < s.n_k; ++j)
                if (allowed(h, i, j)) keys.push_back(j);
            std::vector<double> sc(keys.size());
            double mx = -std::numeric_limits<double>::infinity();
            for (size_t x = 0; x < keys.size(); ++x) mx = std::max(mx, sc[x] = score(s, q, k, h, i, keys[x]));
            double sum = 0;
            for (double e : sc) sum += std::exp(e - mx);
            double* o = out.data() + (static_cast<size_t>(i) * s.n_q_heads + h) * d;
            for (size_t x = 0; x < keys.size(); ++x) {
                const double p = std::exp(sc[x] - mx) / sum;
                const float* vr = v + (static_cast<int64_t>(kvh) * s.kv_stride + keys[x]) * d;
                for (int y = 0; y < d; ++y) o[y] += p * vr[y];
            }
            if (lse != nullptr) (*lse)[static_cast<size_t>(h) * s.n_q + i] = mx + std::log(sum);
        }
    }
    return out;
}

std::vector<double> dense_attention(const AttnShape& s, const float* q, const float* k, const float* v,
                                    std::vector<double>* lse) {
    return masked_attention(
        s, q, k, v, [&](int, int i, int j) { return visible(s, i, j); }, lse);
}

std::vector<double> sparse_prefill(const AttnShape& s, int tile, const float* q, const float* k, const float* v,
                                   const TileSelection& sel, const int32_t* head_map) {
    return masked_attention(s, q, k, v, [&](int h, int i, int j) {
        const int kvh = h / s.group_size();
        const int src = head_map ? head_map[kvh] : kvh;
        const int qt = i / tile;
        if (!visible(s, i, j)) return false;
        return j / tile == qt || in_list(sel.list(src, qt), sel.size(src, qt), j / tile);
    });
}

std::vector<double> token_sparse_prefill(const AttnShape& s, int tile, const float* q, const float* k, const float* v,
                                         const TokenSelection& sel, const int32_t* head_map) {
    return masked_attention(s, q, k, v, [&](int h, int i, int j) {
        const int kvh = h / s.group_size();
        const int src = head_map ? head_map[kvh] : kvh;
        const int qt = i / tile;
        if (!visible(s, i, j)) return false;
        return j / tile == qt || in_list(sel.list(src, qt), sel.size(src, qt), j);
    });
}

std::vector<double> sparse_decode(const AttnShape& s, int tile, const float* q, const float* k, const float* v,
                                  const int32_t* tiles, const int32_t* count, int max_k, const int32_t* head_map) {
    const int last_tile = (s.n_k - 1) / tile;
    return masked_attention(s, q, k, v, [&](int h, int i, int j) {
        const int kvh = h / s.group_size();
        const int src = head_map ? head_map[kvh] : kvh;
        if (!visible(s, i, j)) return false;
        if (j / tile == last_tile) return true;
        return in_list(tiles + static_cast<int64_t>(src) * max_k, count[src], j / tile);
    });
}

std::vector<double> token_sparse_decode(const AttnShape& s, int tile, const float* q, const float* k, const float* v,
                                        const int32_t* keys, const int32_t* count, int max_k, const int32_t* head_map) {
    const int last_tile = (s.n_k - 1) / tile;
    return masked_attention(s, q, k, v, [&](int h, int i, int j) {
        const int kvh = h / s.group_size();
        const int src = head_map ? head_map[kvh] : kvh;
        if (!visible(s, i, j)) return false;
        if (j / tile == last_tile) return true;
        return in_list(keys + static_cast<int64_t>(src) * max_k, count[src], j);
    });
}

std::vector<int> decode_candidate_keys(int n_k, int tile, int window) {
    const int p = n_k - 1;
    std::vector<int> cand;
    for (int j = 0; j < p / tile * tile; ++j)
        if (window == 0 || j > p - window) cand.push_back(j);
    return cand;
}

std::vector<int> decode_candidate_tiles(int n_k, int tile, int window) {
    std::vector<int> tiles;
    for (int j : decode_candidate_keys(n_k, tile, window))
        if (tiles.empty() || tiles.back() != j / tile) tiles.push_back(j / tile);
    return tiles;
}

int decode_token_budget(const TopKRule& rule, int tile, int n_k, int window) {
    const int64_t k = rule_tokens(rule, (n_k - 1) / tile, tile, n_k, window);
    return static_cast<int>(std::min<int64_t>(k, decode_candidate_keys(n_k, tile, window).size()));
}

int decode_tile_budget(const TopKRule& rule, int tile, int n_k, int window) {
    const int64_t tiles = (rule_tokens(rule, (n_k - 1) / tile, tile, n_k, window) + tile - 1) / tile;
    return static_cast<int>(std::min<int64_t>(tiles, decode_candidate_tiles(n_k, tile, window).size()));
}

std::vector<double> decode_token_mass(const AttnShape& s, int tile, const float* q, const float* k, bool pre_softmax) {
    std::vector<double> mass(static_cast<size_t>(s.n_kv_heads) * s.n_k, 0.0);
    const double lowest = -std::numeric_limits<double>::infinity();
    const std::vector<int> cand = decode_candidate_keys(s.n_k, tile, s.window);
    for (int kvh = 0; kvh < s.n_kv_heads; ++kvh) {
        double* row = mass.data() + static_cast<size_t>(kvh) * s.n_k;
        for (int j : cand) row[j] = pre_softmax ? lowest : 0.0;
        for (int g = 0; g < s.group_size(); ++g) {
            const int h = kvh * s.group_size() + g;
            const std::vector<double> p = visible_row(s, q, k, h, 0);
            for (int j : cand) row[j] = pre_softmax ? std::max(row[j], score(s, q, k, h, 0, j)) : row[j] + p[j];
        }
    }
    return mass;
}

std::vector<double> decode_tile_mass(const AttnShape& s, int tile, const float* q, const float* k, bool pre_softmax) {
    const std::vector<double> keys = decode_token_mass(s, tile, q, k, pre_softmax);
    const int n_tiles = (s.n_k - 1) / tile + 1;
    std::vector<double> mass(static_cast<size_t>(s.n_kv_heads) * n_tiles, 0.0);
    const std::vector<int> cand = decode_candidate_keys(s.n_k, tile, s.window);
    for (int kvh = 0; kvh < s.n_kv_heads; ++kvh) {
        double* row = mass.data() + static_cast<size_t>(kvh) * n_tiles;
        std::vector<bool> started(n_tiles, false);
        for (int j : cand) {
            const double x = keys[static_cast<size_t>(kvh) * s.n_k + j];
            const int t = j / tile;
            row[t] = !started[t] ? x : pre_softmax ? std::max(row[t], x) : row[t] + x;
            started[t] = true;
        }
    }
    return mass;
}

std::vector<int32_t> top_by_sort(const float* row, std::vector<int> candidates, int budget) {
    std::stable_sort(candidates.begin(), candidates.end(), [&](int a, int b) { return row[a] > row[b]; });
    std::vector<int32_t> keep(candidates.begin(), candidates.begin() + budget);
    std::sort(keep.begin(), keep.end());
    return keep;
}

namespace {

std::vector<float> page_extreme(const AttnShape& s, const float* k, int kv_head, int page, bool take_max) {
    const int n_pages = tile_count(s.n_k, page);
    std::vector<float> out(static_cast<size_t>(n_pages) * s.head_dim);
    for (int x = 0; x < n_pages; ++x) {
        for (int p = 0; p < s.head_dim; ++p) {
            float e = take_max ? -std::numeric_limits<float>::infinity() : std::numeric_limits<float>::infinity();
            for (int j = x * page; j < std::min(s.n_k, (x + 1) * page); ++j) {
                const float kj = k[(static_cast<int64_t>(kv_head) * s.kv_stride + j) * s.head_dim + p];
                e = take_max ? std::max(e, kj) : std::min(e, kj);
            }
            out[static_cast<size_t>(x) * s.head_dim + p] = e;
        }
    }
    return out;
}

}  // namespace

std::vector<float> page_min(const AttnShape& s, const float* k, int kv_head, int page) {
    return page_extreme(s, k, kv_head, page, false);
}

std::vector<float> page_max(const AttnShape& s, const float* k, int kv_head, int page) {
    return page_extreme(s, k, kv_head, page, true);
}

std::vector<double> quest_page_scores(const AttnShape& s, const float* q, const float* k, int page) {
    const int n_pages = (s.n_k - 1) / page + 1;
    std::vector<double> scores(static_cast<size_t>(s.n_kv_heads) * n_pages, 0.0);
    for (int kvh = 0; kvh < s.n_kv_heads; ++kvh) {
        const std::vector<float> lo = page_min(s, k, kvh, page), hi = page_max(s, k, kvh, page);
        for (int x : decode_candidate_tiles(s.n_k, page, s.window)) {
            double sum = 0;
            for (int g = 0; g < s.group_size(); ++g) {
                const float* qh = q + static_cast<int64_t>(kvh * s.group_size() + g) * s.head_dim;
                for (int p = 0; p < s.head_dim; ++p) {
                    const double a = static_cast<double>(qh[p]) * lo[static_cast<size_t>(x) * s.head_dim + p];
                    const double b = static_cast<double>(qh[p]) * hi[static_cast<size_t>(x) * s.head_dim + p];
                    sum += std::max(a, b);
                }
            }
            scores[static_cast<size_t>(kvh) * n_pages + x] = sum;
        }
    }
    return scores;
}

std::vector<double> tile_mass_post_softmax(const AttnShape& s, int tile, const float* q, const float* k) {
    const int nqt = tile_count(s.n_q, tile), nkt = tile_count(s.n_k, tile);
    std::vector<double> mass(static_cast<size_t>(s.n_kv_heads) * nqt * nkt, 0.0);
    for (int h = 0; h < s.n_q_heads; ++h) {
        const int kvh = h / s.group_size();
        for (int i = 0; i < s.n_q; ++i) {
            const std::vector<double> p = visible_row(s, q, k, h, i);
            double* row = mass.data() + (static_cast<size_t>(kvh) * nqt + i / tile) * nkt;
            for (size_t j = 0; j < p.size(); ++j) row[j / tile] += p[j];
        }
    }
    return mass;
}

std::vector<double> tile_max_score(const AttnShape& s, int tile, const float* q, const float* k) {
    const int nqt = tile_count(s.n_q, tile), nkt = tile_count(s.n_k, tile);
    const double lowest = -std::numeric_limits<double>::infinity();
    std::vector<double> best(static_cast<size_t>(s.n_kv_heads) * nqt * nkt, lowest);
    for (int h = 0; h < s.n_q_heads; ++h) {
        const int kvh = h / s.group_size();
        for (int i = 0; i < s.n_q; ++i) {
            double* row = best.data() + (static_cast<size_t>(kvh) * nqt + i / tile) * nkt;
            for (int j = 0; j <= position(s, i); ++j)
                if (visible(s, i, j)) row[j / tile] = std::max(row[j / tile], score(s, q, k, h, i, j));
        }
    }
    for (double& x : best)
        if (x == lowest) x = 0;
    return best;
}

std::vector<double> token_mass_post_softmax(const AttnShape& s, int tile, const float* q, const float* k) {
    return token_pool<false>(s, tile, q, k);
}

std::vector<double> token_max_score(const AttnShape& s, int tile, const float* q, const float* k) {
    return token_pool<true>(s, tile, q, k);
}

std::vector<int> candidate_keys(int q_tile, int tile, int window) {
    std::vector<int> cand;
    for (int j = 0; j < q_tile * tile; ++j) {
        bool seen = false;
        for (int p = q_tile * tile; p < (q_tile + 1) * tile; ++p) seen = seen || window == 0 || j > p - window;
        if (seen) cand.push_back(j);
    }
    return cand;
}

int token_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window) {
    const int64_t k = rule_tokens(rule, q_tile, tile, n_keys, window);
    return static_cast<int>(std::min<int64_t>(k, candidate_keys(q_tile, tile, window).size()));
}

namespace {

/// The top-k of either granularity: per (KV head, query tile) the candidates (candidates(qt, tile, window)) ordered by
/// mass, ties to the lower index, the first budget(rule, qt, tile, n_keys, window) of them, ascending, into `ids`.
template <class Selection, class Mass, class Candidates, class Budget>
Selection select_top(const Mass& scores, const TopKRule& rule, Candidates candidates, Budget budget,
                     std::vector<int32_t> Selection::*ids) {
    Selection sel;
    sel.n_kv_heads = scores.n_kv_heads;
    sel.n_q_tiles = scores.n_q_tiles;
    sel.tile = scores.tile;
    for (int qt = 0; qt < scores.n_q_tiles; ++qt)
        sel.max_k = std::max(sel.max_k, budget(rule, qt, scores.tile, scores.n_keys, scores.window));
    sel.count.assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles, 0);
    (sel.*ids).assign(static_cast<size_t>(sel.n_kv_heads) * sel.n_q_tiles * sel.max_k, -1);
    for (int h = 0; h < scores.n_kv_heads; ++h) {
        for (int qt = 0; qt < scores.n_q_tiles; ++qt) {
            std::vector<int> cand = candidates(qt, scores.tile, scores.window);
            const float* row = scores.row(h, qt);
            std::stable_sort(cand.begin(), cand.end(), [&](int a, int b) { return row[a] > row[b]; });
            const int kk = budget(rule, qt, scores.tile, scores.n_keys, scores.window);
            std::vector<int> keep(cand.begin(), cand.begin() + kk);
            std::sort(keep.begin(), keep.end());
            std::copy(keep.begin(), keep.end(), sel.list(h, qt));
            sel.count[static_cast<size_t>(h) * sel.n_q_tiles + qt] = kk;
        }
    }
    return sel;
}

}  // namespace

TokenSelection select_topk_tokens(const TokenMass& scores, const TopKRule& rule) {
    return select_top(scores, rule, candidate_keys, token_budget, &TokenSelection::keys);
}

std::vector<int> candidate_tiles(int q_tile, int tile, int window) {
    std::vector<int> cand;
    for (int kt = 0; kt < q_tile; ++kt)
        if (window == 0 || tile_in_window(q_tile, kt, tile, window)) cand.push_back(kt);
    return cand;
}

int topk_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window) {
    const int64_t tokens = rule_tokens(rule, q_tile, tile, n_keys, window);
    const int64_t tiles = (tokens + tile - 1) / tile;
    return static_cast<int>(std::min<int64_t>(tiles, candidate_tiles(q_tile, tile, window).size()));
}

TileSelection select_topk(const TileMass& scores, const TopKRule& rule) {
    return select_top(scores, rule, candidate_tiles, topk_budget, &TileSelection::tiles);
}

TileSimilarity similarity(const TileMass& mass_b, const TileSelection& sel_b, int head_b, const TileSelection& sel_a,
                          int head_a, int q_tile) {
    const std::set<int> a(sel_a.list(head_a, q_tile), sel_a.list(head_a, q_tile) + sel_a.size(head_a, q_tile));
    const std::set<int> b(sel_b.list(head_b, q_tile), sel_b.list(head_b, q_tile) + sel_b.size(head_b, q_tile));
    if (a.empty() && b.empty()) return {1.0f, 1.0f};
    const float* row = mass_b.row(head_b, q_tile);
    double on_a = 0, on_b = 0;
    for (int t : a) on_a += row[t];
    for (int t : b) on_b += row[t];
    int both = 0;
    for (int t : a) both += static_cast<int>(b.count(t));
    const int either = static_cast<int>(a.size() + b.size()) - both;
    TileSimilarity r;
    r.recall = on_b > 0 ? static_cast<float>(on_a / on_b) : 1.0f;
    r.jaccard = static_cast<float>(static_cast<double>(both) / either);
    return r;
}

AttnInputs random_inputs(int n_q_heads, int n_kv_heads, int head_dim, int n_q, int n_k, uint64_t seed) {
    AttnInputs in;
    AttnShape& s = in.shape;
    s.n_q_heads = n_q_heads;
    s.n_kv_heads = n_kv_heads;
    s.head_dim = head_dim;
    s.n_q = n_q;
    s.n_k = n_k;
    s.kv_stride = n_k + 3;
    s.scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
    // Spread 2 gives peaked but not one-hot softmax rows at d = 8..128.
    in.q = random_floats(static_cast<size_t>(n_q) * n_q_heads * head_dim, seed, -2.0f, 2.0f);
    in.k = random_floats(static_cast<size_t>(n_kv_heads) * s.kv_stride * head_dim, seed + 1, -2.0f, 2.0f);
    in.v = random_floats(in.k.size(), seed + 2);
    for (int h = 0; h < n_kv_heads; ++h) {
        for (size_t x = (static_cast<size_t>(h) * s.kv_stride + n_k) * head_dim;
             x < static_cast<size_t>(h + 1) * s.kv_stride * head_dim; ++x) {
            in.k[x] = in.v[x] = std::numeric_limits<float>::quiet_NaN();
        }
    }
    return in;
}

std::vector<float> random_floats(size_t n, uint64_t seed, float lo, float hi) {
    std::mt19937_64 gen(seed);
    std::uniform_real_distribution<float> dist(lo, hi);
    std::vector<float> x(n);
    for (float& e : x) e = dist(gen);
    return x;
}

double max_abs_diff(const float* a, const double* b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
        worst = std::max(worst, std::abs(a[i] - b[i]));
    }
    return worst;
}

double max_abs_diff(const float* a, const float* b, size_t n) {
    double worst = 0;
    for (size_t i = 0; i < n; ++i) {
        if (!std::isfinite(a[i]) || !std::isfinite(b[i])) return std::numeric_limits<double>::infinity();
        worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]));
    }
    return worst;
}

}  // namespace kascade::reference
