// kernels/sparse_attention.cpp: Kascade sparse prefill and decode, over selected key tiles or individual keys. In
// prefill, selected tiles are read in place as runs of adjacent tiles and selected keys are gathered into blocks;
// both go through the same score / online-softmax / value blocks as the dense kernel, followed by the causal
// diagonal tile, in one driver (sparse_prefill), so the softmax is exact over exactly the attended keys. Decode
// turns the selection into key ranges or a key list for the dense decode pass.
#include "kernels/sparse_attention.h"

#include <omp.h>

#include <algorithm>
#include <vector>

#include "base/error.h"
#include "kernels/attention_engine.h"
#include "kernels/attention_simd.h"
#include "kernels/decode_scoring.h"

namespace kascade {
namespace {

constexpr int kMaxRunKeys = 64;  ///< adjacent selected tiles are merged into key blocks of up to this many keys
/// A token-sparse decode builds its key lists in parallel from this many keys on; a short context's few hundred keys
/// copy in less time than a parallel region takes to start.
constexpr size_t kParallelListKeys = 4096;

void check_head_map(const int32_t* head_map, int n_kv_heads, int n_selection_heads) {
    if (head_map == nullptr) {
        KASCADE_ASSERT(n_kv_heads <= n_selection_heads);
        return;
    }
    for (int h = 0; h < n_kv_heads; ++h) KASCADE_ASSERT(head_map[h] >= 0 && head_map[h] < n_selection_heads);
}

/// Calls add(start, end) for the key ranges a tile-sparse decode attends for one KV head, ascending: each selected tile
/// (tiles[0 .. n), ascending, before the query's tile) and then the query's own, possibly partial, tile, clipped to the
/// query's window (ranges left empty are skipped).
template <typename Add>
void for_each_decode_tile_range(const AttnShape& shape, int tile, const int32_t* tiles, int n, Add add) {
    const int last_tile = (shape.n_k - 1) / tile;
    const int window = shape.effective_window();
    const int key_begin = window > 0 ? shape.n_k - window : 0;  // the query's window: keys key_begin .. n_k-1
    const auto clipped = [&](int start, int end) {
        start = std::max(start, key_begin);
        if (start < end) add(start, end);
    };
    for (int i = 0; i < n; ++i) {
        KASCADE_ASSERT(tiles[i] >= 0 && tiles[i] < last_tile && (i == 0 || tiles[i] > tiles[i - 1]));
        clipped(tiles[i] * tile, (tiles[i] + 1) * tile);
    }
    clipped(last_tile * tile, shape.n_k);
}

/// One query tile of one KV head inside the prefill driver: its query block and where its keys are.
struct PrefillItem {
    detail::QueryBlock& block;
    float* extra;      ///< the caller's per-thread scratch (extra_floats floats)
    int src;           ///< the selection's head this KV head reads (head map)
    int q_tile, row0;  ///< query tile and its first row
    int key_begin;     ///< keys before it are outside every row's window
    KvPtr k_head;
    KvPtr v_head;
};

/// The prefill both granularities share: one work item per (query tile, KV head), later tiles first (they usually
/// keep more keys); each item loads its query block, lets attend_selected(item) go over the selected keys, then
/// attends the causal diagonal tile in place and stores the rows. Checks the arguments both entry points share.
template <typename Selection, typename AttendSelected>
void sparse_prefill(const AttnShape& shape, int tile, const Selection& selection, int max_keys, size_t extra_floats,
                    const float* q, KvPtr k, KvPtr v, const int32_t* head_map, float* out,
                    AttendSelected attend_selected) {
    detail::check_attn_shape(shape);
    KASCADE_ASSERT(q != nullptr && k != nullptr && v != nullptr && out != nullptr);
    KASCADE_ASSERT(shape.n_q == shape.n_k && tile > 0 && selection.tile == tile);
    KASCADE_ASSERT(selection.n_q_tiles == tile_count(shape.n_q, tile));
    check_head_map(head_map, shape.n_kv_heads, selection.n_kv_heads);
    const int n_q_tiles = selection.n_q_tiles;
    const int group = shape.group_size();
    const int d = shape.head_dim;
    const int n_kv = shape.n_kv_heads;
    const int n_items = n_kv * n_q_tiles;
    const size_t block_floats = detail::query_block_floats(d, group, tile, max_keys);
    const size_t per_thread = block_floats + extra_floats;
    std::vector<float> scratch(per_thread * omp_get_max_threads());
    const float prescale = shape.scale * detail::kLog2e;

#pragma omp parallel
    {
        float* mine = scratch.data() + per_thread * omp_get_thread_num();
        detail::QueryBlock b = detail::query_block_bind(mine, d, group, tile, max_keys);
#pragma omp for schedule(dynamic, 1)
        for (int item = 0; item < n_items; ++item) {
            const int qt = n_q_tiles - 1 - item / n_kv;
            const int kv_head = item % n_kv;
            const int row0 = qt * tile;
            const int n_rows = std::min(tile, shape.n_q - row0);
            detail::query_block_load(b, shape, q, kv_head, row0, n_rows, prescale, true);
            const int64_t head_off = static_cast<int64_t>(kv_head) * shape.kv_stride * d;
            const KvPtr k_head = k + head_off;
            const KvPtr v_head = v + head_off;
            // Keys before the first row's window are outside every row's window (a selection made under another
            // layer's window may hold such keys); the rest of the window is masked per key.
            attend_selected(PrefillItem{b, mine + block_floats, head_map ? head_map[kv_head] : kv_head, qt, row0,
                                        detail::window_key_begin(row0, b.window, 1), k_head, v_head});
            detail::query_block_scores(b, k_head + static_cast<int64_t>(row0) * d, n_rows, row0);
            detail::query_block_softmax(b, n_rows);
            detail::query_block_accumulate(b, v_head + static_cast<int64_t>(row0) * d, n_rows);
            detail::query_block_store(b, shape, kv_head, row0, out, nullptr);
        }
    }
}

}  // namespace

void attn_sparse_prefill(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v,
                         const TileSelection& selection, const int32_t* head_map, float* out) {
    const int d = shape.head_dim;
    const int run_tiles = std::max(1, kMaxRunKeys / tile);
    sparse_prefill(shape, tile, selection, run_tiles * tile, 0, q, k, v, head_map, out, [&](const PrefillItem& it) {
        const int32_t* list = selection.list(it.src, it.q_tile);
        const int count = selection.size(it.src, it.q_tile);
        KASCADE_ASSERT(count >= 0 && count <= selection.max_k);
        // Runs of adjacent tiles, clipped to the window, read in place.
        for (int i = 0; i < count;) {
            KASCADE_ASSERT(list[i] >= 0 && list[i] < it.q_tile && (i == 0 || list[i] > list[i - 1]));
            int j = i + 1;
            while (j < count && j - i < run_tiles && list[j] == list[j - 1] + 1) ++j;
            const int run_begin = std::max(list[i] * tile, it.key_begin);
            const int run_end = (list[j - 1] + 1) * tile;
            if (run_begin < run_end) {
                const int n_keys = run_end - run_begin;
                detail::query_block_scores(it.block, it.k_head + static_cast<int64_t>(run_begin) * d, n_keys,
                                           run_begin);
                detail::query_block_softmax(it.block, n_keys);
                detail::query_block_accumulate(it.block, it.v_head + static_cast<int64_t>(run_begin) * d, n_keys);
            }
            i = j;
        }
    });
}

void attn_token_sparse_prefill(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v,
                               const TokenSelection& selection, const int32_t* head_map, float* out) {
    const int d = shape.head_dim;
    // Per thread after the query block: gathered K and V rows [kMaxRunKeys][d] and their positions. A gathered
    // block holds kMaxRunKeys keys, and the diagonal tile goes through the same scratch.
    const size_t gather_floats = 2 * static_cast<size_t>(kMaxRunKeys) * d + kMaxRunKeys;
    sparse_prefill(shape, tile, selection, std::max(kMaxRunKeys, tile), gather_floats, q, k, v, head_map, out,
                   [&](const PrefillItem& it) {
                       float* k_rows = it.extra;
                       float* v_rows = k_rows + static_cast<size_t>(kMaxRunKeys) * d;
                       auto* key_pos = reinterpret_cast<int32_t*>(v_rows + static_cast<size_t>(kMaxRunKeys) * d);
                       const int32_t* list = selection.list(it.src, it.q_tile);
                       const int count = selection.size(it.src, it.q_tile);
                       KASCADE_ASSERT(count >= 0 && count <= selection.max_k);
                       int n_gathered = 0;
                       const auto flush = [&] {
                           if (n_gathered == 0) return;
                           detail::query_block_scores_gathered(it.block, k_rows, n_gathered, key_pos);
                           detail::query_block_softmax(it.block, n_gathered);
                           detail::query_block_accumulate(it.block, v_rows, n_gathered);
                           n_gathered = 0;
                       };
                       for (int i = 0; i < count; ++i) {
                           const int key = list[i];
                           KASCADE_ASSERT(key >= 0 && key < it.row0 && (i == 0 || key > list[i - 1]));
                           if (key < it.key_begin) continue;
                           kv_to_float(it.k_head + static_cast<int64_t>(key) * d, d,
                                       k_rows + static_cast<int64_t>(n_gathered) * d);
                           kv_to_float(it.v_head + static_cast<int64_t>(key) * d, d,
                                       v_rows + static_cast<int64_t>(n_gathered) * d);
                           key_pos[n_gathered++] = key;
                           if (n_gathered == kMaxRunKeys) flush();
                       }
                       flush();
                   });
}

void attn_sparse_decode(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, const int32_t* tiles,
                        const int32_t* count, int max_k, const int32_t* head_map, float* out) {
    detail::check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1 && tile > 0 && max_k >= 0 && count != nullptr);
    KASCADE_ASSERT(tiles != nullptr || max_k == 0);
    std::vector<detail::KeyRange> ranges;
    std::vector<int> range_begin(shape.n_kv_heads + 1, 0);
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        // head_map values are only known to be in range of the caller's selection, which we cannot see here.
        const int src = head_map ? head_map[h] : h;
        KASCADE_ASSERT(src >= 0);
        range_begin[h] = static_cast<int>(ranges.size());
        const int n = count[src];
        KASCADE_ASSERT(n >= 0 && n <= max_k);
        // Adjacent ranges merged.
        for_each_decode_tile_range(shape, tile, tiles + static_cast<int64_t>(src) * max_k, n, [&](int start, int end) {
            if (static_cast<int>(ranges.size()) > range_begin[h] && ranges.back().start + ranges.back().len == start) {
                ranges.back().len += end - start;
            } else {
                ranges.push_back({start, end - start});
            }
        });
    }
    range_begin[shape.n_kv_heads] = static_cast<int>(ranges.size());
    detail::decode_pass(shape, q, k, v, ranges.data(), range_begin.data(), out);
}

namespace {

/// The keys of a token-sparse decode, per KV head (list[list_begin[h] .. list_begin[h + 1])): its selected keys
/// inside the query's window (ascending, so they start at a binary search), then the keys of the query's own tile.
/// The lists are sized first and filled per head in parallel: built serially with a check of every key, they took a
/// fifth of a reuse layer's decode at 32K keys (2 threads).
void token_decode_lists(const AttnShape& shape, int tile, const int32_t* keys, const int32_t* count, int max_k,
                        const int32_t* head_map, std::vector<int32_t>* list, std::vector<int>* list_begin) {
    detail::check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1 && tile > 0 && max_k >= 0 && count != nullptr);
    KASCADE_ASSERT(keys != nullptr || max_k == 0);
    const int own_begin = (shape.n_k - 1) / tile * tile;
    const int window = shape.effective_window();
    const int key_begin = window > 0 ? shape.n_k - window : 0;  // the query's window: keys key_begin .. n_k-1
    const int own_first = std::max(own_begin, key_begin);
    const auto selected_of = [&](int h) { return keys + static_cast<int64_t>(head_map ? head_map[h] : h) * max_k; };
    const auto count_of = [&](int h) { return count[head_map ? head_map[h] : h]; };
    std::vector<int> skip(shape.n_kv_heads);
    list_begin->assign(shape.n_kv_heads + 1, 0);
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        KASCADE_ASSERT(head_map == nullptr || head_map[h] >= 0);
        const int n = count_of(h);
        KASCADE_ASSERT(n >= 0 && n <= max_k);
        skip[h] = static_cast<int>(std::lower_bound(selected_of(h), selected_of(h) + n, key_begin) - selected_of(h));
        (*list_begin)[h + 1] = (*list_begin)[h] + (n - skip[h]) + (shape.n_k - own_first);
    }
    list->resize((*list_begin)[shape.n_kv_heads]);
#pragma omp parallel for schedule(static) if (list->size() > kParallelListKeys)
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int32_t* selected = selected_of(h);
        const int n = count_of(h);
        int32_t* out_list = list->data() + (*list_begin)[h];
        bool ascending = n == 0 || (selected[0] >= 0 && selected[n - 1] < own_begin);
        for (int i = 1; i < n; ++i) ascending &= selected[i] > selected[i - 1];
        KASCADE_ASSERT(ascending);  // and inside 0 .. own_begin - 1, so every list entry is a distinct key
        out_list = std::copy(selected + skip[h], selected + n, out_list);
        for (int j = own_first; j < shape.n_k; ++j) *out_list++ = j;
    }
}

}  // namespace

void attn_token_sparse_decode(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, const int32_t* keys,
                              const int32_t* count, int max_k, const int32_t* head_map, float* out) {
    std::vector<int32_t> list;
    std::vector<int> list_begin;
    token_decode_lists(shape, tile, keys, count, max_k, head_map, &list, &list_begin);
    detail::decode_pass_gathered(shape, q, k, v, list.data(), list_begin.data(), out);
}

namespace {

/// The keys of a tile-sparse decode over its own selection, per KV head (list[list_begin[h] .. list_begin[h + 1])): the
/// keys of for_each_decode_tile_range's ranges.
void tile_decode_lists(const AttnShape& shape, int tile, const TileSelection& selection, std::vector<int32_t>* list,
                       std::vector<int>* list_begin) {
    detail::check_attn_shape(shape);
    KASCADE_ASSERT(shape.n_q == 1 && tile > 0 && selection.n_q_tiles == 1 && selection.tile == tile);
    KASCADE_ASSERT(selection.n_kv_heads == shape.n_kv_heads);
    list->clear();
    list_begin->assign(shape.n_kv_heads + 1, 0);
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        const int n = selection.size(h, 0);
        KASCADE_ASSERT(n >= 0 && n <= selection.max_k);
        for_each_decode_tile_range(shape, tile, selection.list(h, 0), n, [list](int start, int end) {
            for (int j = start; j < end; ++j) list->push_back(j);
        });
        (*list_begin)[h + 1] = static_cast<int>(list->size());
    }
}

/// The listed keys attended with the scores of the scoring pass in `scored`, which must have run on this call's query
/// and K: gathered here from its score rows into list order (decode_pass_scored's layout).
void decode_listed_scored(const AttnShape& shape, const DecodeScoringScratch& scored, KvPtr v,
                          const std::vector<int32_t>& list, const std::vector<int>& list_begin, float* out) {
    const DecodeScoreLayout& layout = scored.scored;
    KASCADE_ASSERT(layout.n_k == shape.n_k && layout.rows_kept && shape.n_q == 1);
    const int group = shape.group_size();
    int ld = 0;
    for (int h = 0; h < shape.n_kv_heads; ++h) ld = std::max(ld, list_begin[h + 1] - list_begin[h]);
    std::vector<float> listed(static_cast<size_t>(shape.n_q_heads) * ld);
#pragma omp parallel for schedule(static) if (list.size() > kParallelListKeys)
    for (int h = 0; h < shape.n_kv_heads; ++h) {
        for (int g = 0; g < group; ++g) {
            const float* row = scored.scores.data() + (static_cast<int64_t>(h) * group + g) * layout.ld;
            float* dst = listed.data() + (static_cast<int64_t>(h) * group + g) * ld;
            for (int i = list_begin[h]; i < list_begin[h + 1]; ++i) {
                KASCADE_ASSERT(list[i] >= layout.key_begin);  // inside the window the pass scored
                *dst++ = row[list[i] - layout.key_begin];
            }
        }
    }
    detail::decode_pass_scored(shape, listed.data(), ld, layout.log2 ? 1.0f : detail::kLog2e, v, list.data(),
                               list_begin.data(), out);
}

}  // namespace

void attn_sparse_decode_scored(const AttnShape& shape, int tile, const DecodeScoringScratch& scored, KvPtr v,
                               const TileSelection& selection, float* out) {
    std::vector<int32_t> list;
    std::vector<int> list_begin;
    tile_decode_lists(shape, tile, selection, &list, &list_begin);
    decode_listed_scored(shape, scored, v, list, list_begin, out);
}

void attn_token_sparse_decode_scored(const AttnShape& shape, int tile, const DecodeScoringScratch& scored, KvPtr v,
                                     const TokenSelection& selection, float* out) {
    KASCADE_ASSERT(selection.n_q_tiles == 1 && selection.tile == tile && selection.n_kv_heads == shape.n_kv_heads);
    std::vector<int32_t> list;
    std::vector<int> list_begin;
    token_decode_lists(shape, tile, selection.keys.data(), selection.count.data(), selection.max_k, nullptr, &list,
                       &list_begin);
    if (scored.listed_ld == 0) {
        decode_listed_scored(shape, scored, v, list, list_begin, out);
        return;
    }
    // The pass made this selection and gathered its lists' scores (DecodeScoringScratch::listed_scores).
    KASCADE_ASSERT(scored.scored.n_k == shape.n_k && scored.listed_count == selection.count);
    detail::decode_pass_scored(shape, scored.listed_scores.data(), scored.listed_ld,
                               scored.scored.log2 ? 1.0f : detail::kLog2e, v, list.data(), list_begin.data(), out);
}

}  // namespace kascade
