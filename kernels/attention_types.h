// kernels/attention_types.h: shapes and plain-data containers shared by the attention kernels.
//
// Memory layout (fp32, row-major) used by every attention kernel:
//   q, out : token-major [n_q][n_q_heads][head_dim]      (row stride n_q_heads*head_dim, as the projections write it)
//   k, v   : head-major  [n_kv_heads][kv_stride][head_dim] (a KV cache with room for kv_stride rows per head;
//                                                           rows 0..n_k-1 are valid), fp32 or BF16 (kernels/kv_ptr.h)
// Query row i sits at absolute position n_k - n_q + i and attends causally to keys 0..(its position).
// GQA: query head h reads KV head h / (n_q_heads / n_kv_heads).
//
// Sliding window (AttnShape::window = w > 0, Mistral's and Qwen2's sliding_window): a query at position p attends
// only keys j with p - w < j <= p, exactly w keys including itself once p >= w - 1. This is Hugging Face's mask
// `kv_idx > q_idx - sliding_window` (with the causal `kv_idx <= q_idx`). w = 0, or any w >= n_k, changes nothing.
//
// Tiles: key tile j holds keys [j*tile, min((j+1)*tile, n_k)); a query at position p belongs to query tile p / tile.
// For a query tile qt the *candidate* key tiles are those strictly before it (kt < qt) that hold at least one key
// inside the window of at least one query of the tile: first_window_tile(qt, tile, w) .. qt-1 (0 .. qt-1 without a
// window). The diagonal tile qt is always attended, causally (and, like every tile, only inside each row's window).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "base/modes.h"
#include "kernels/kv_ptr.h"

namespace kascade {

struct AttnShape {
    int n_q_heads = 0;
    int n_kv_heads = 0;
    int head_dim = 0;
    int n_q = 0;        ///< query rows in this call
    int n_k = 0;        ///< keys in the cache (n_k >= n_q); the queries are the last n_q positions
    int kv_stride = 0;  ///< rows per head in k and v (>= n_k)
    float scale = 0;    ///< softmax scale, usually 1/sqrt(head_dim)
    int window = 0;     ///< sliding window in keys (query at p sees p - window < j <= p); 0 = no window
    /// Decode products with a BF16 cache (--matmul): Exact widens the stored rows to fp32; Bf16 rounds the query and
    /// the softmax weights to BF16 and takes BF16 dot products where the CPU has them (kernels/decode_bf16_dot.h).
    MatmulPrecision products = MatmulPrecision::Exact;

    /// The window that can cut anything: 0 when there is none or it covers every key (window >= n_k).
    int effective_window() const { return window > 0 && window < n_k ? window : 0; }

    int group_size() const { return n_q_heads / n_kv_heads; }
    int q_row_stride() const { return n_q_heads * head_dim; }
};

inline int tile_count(int n, int tile) {
    return (n + tile - 1) / tile;
}

/// First key tile holding a key inside the window of some query of query tile q_tile (queries at positions
/// q_tile*tile ..): the window of the tile's first query starts lowest, at q_tile*tile - window + 1. 0 without a
/// window (window == 0).
inline int first_window_tile(int q_tile, int tile, int window) {
    if (window <= 0) return 0;
    const int64_t first_key = static_cast<int64_t>(q_tile) * tile - window + 1;
    return first_key <= 0 ? 0 : static_cast<int>(first_key / tile);
}

/// Attention mass pooled per (KV head, query tile, key tile): the sum, over the query heads of the GQA group and the
/// query rows of the tile, of the post-softmax probabilities of the keys in the key tile (or, for the pre-softmax
/// ablation, the max raw score over the keys inside the rows' windows). Key tiles after the diagonal or wholly outside
/// the window of every query of the tile are 0. Every query row contributes exactly 1 per query head to the
/// post-softmax sum, so a query tile's row sums to (query heads per group) x (rows in the tile).
struct TileMass {
    int n_kv_heads = 0;
    int n_q_tiles = 0;
    int n_k_tiles = 0;
    int tile = 0;
    std::vector<float> mass;  ///< [n_kv_heads][n_q_tiles][n_k_tiles]
    int window = 0;           ///< AttnShape::effective_window() of the pooled layer: top-k selects only inside it
    int n_keys = 0;           ///< keys of the pooled sequence (the "sequence" k rule's L)

    float* row(int kv_head, int q_tile) {
        return mass.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * n_k_tiles;
    }
    const float* row(int kv_head, int q_tile) const {
        return mass.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * n_k_tiles;
    }
};

// KeyGranularity, Pooling and KRule, with their names: base/modes.h.

/// How many keys a query tile keeps: a fixed number of key tiles, or a percentage (see KRule) with a floor of
/// k_min_tokens, optionally rounded up to a multiple of round_k tokens (the paper's kernels use 128). With tile
/// granularity the tokens are rounded up to whole tiles. Always capped by the candidates available (keys or key tiles
/// before the query tile, inside the window if the layer has one).
struct TopKRule {
    int tiles = 0;                   ///< > 0: keep this many key tiles (tiles * tile keys at token granularity)
    float pct = 0;                   ///< > 0 (and tiles == 0): keep pct% of the context that k_rule names
    int k_min_tokens = 128;          ///< floor for the pct rule, in tokens
    KRule k_rule = KRule::Sequence;  ///< what pct is a percentage of
    int round_k = 0;                 ///< > 0: k rounded up to a multiple of this many tokens (before the cap)
};

/// Selected key tiles per (KV head, query tile), strictly before the diagonal, ascending tile index. A layer that
/// reads a selection made under another window attends only the keys of those tiles inside its own window.
struct TileSelection {
    int n_kv_heads = 0;
    int n_q_tiles = 0;
    int max_k = 0;  ///< capacity per (head, query tile)
    int tile = 0;
    std::vector<int32_t> count;  ///< [n_kv_heads][n_q_tiles] valid entries
    std::vector<int32_t> tiles;  ///< [n_kv_heads][n_q_tiles][max_k]; entries past count are unspecified

    const int32_t* list(int kv_head, int q_tile) const {
        return tiles.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * max_k;
    }
    int32_t* list(int kv_head, int q_tile) {
        return tiles.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * max_k;
    }
    int size(int kv_head, int q_tile) const { return count[static_cast<int64_t>(kv_head) * n_q_tiles + q_tile]; }
};

/// First key inside the window of some query of query tile q_tile (the tile's first query, at q_tile * tile, sees
/// the earliest keys); 0 without a window. The token candidates of the tile are keys first_window_key .. q_tile*tile-1.
inline int first_window_key(int q_tile, int tile, int window) {
    if (window <= 0) return 0;
    const int64_t first = static_cast<int64_t>(q_tile) * tile - window + 1;
    return first <= 0 ? 0 : static_cast<int>(first);
}

/// Pooled attention per (KV head, query tile, key): the token-granularity counterpart of TileMass. Only the
/// candidates of a query tile are filled (keys strictly before it and inside the window of some query of the tile);
/// every other entry is 0.
struct TokenMass {
    int n_kv_heads = 0;
    int n_q_tiles = 0;
    int n_keys = 0;
    int tile = 0;
    std::vector<float> mass;  ///< [n_kv_heads][n_q_tiles][n_keys]
    int window = 0;           ///< AttnShape::effective_window() of the pooled layer

    float* row(int kv_head, int q_tile) {
        return mass.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * n_keys;
    }
    const float* row(int kv_head, int q_tile) const {
        return mass.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * n_keys;
    }
};

/// Selected individual keys per (KV head, query tile), strictly before the query tile, ascending key index. As with
/// TileSelection, a layer reading a selection made under another window attends only the selected keys inside its
/// own window.
struct TokenSelection {
    int n_kv_heads = 0;
    int n_q_tiles = 0;
    int max_k = 0;  ///< capacity per (head, query tile)
    int tile = 0;
    std::vector<int32_t> count;  ///< [n_kv_heads][n_q_tiles] valid entries
    std::vector<int32_t> keys;   ///< [n_kv_heads][n_q_tiles][max_k]; entries past count are unspecified

    const int32_t* list(int kv_head, int q_tile) const {
        return keys.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * max_k;
    }
    int32_t* list(int kv_head, int q_tile) {
        return keys.data() + (static_cast<int64_t>(kv_head) * n_q_tiles + q_tile) * max_k;
    }
    int size(int kv_head, int q_tile) const { return count[static_cast<int64_t>(kv_head) * n_q_tiles + q_tile]; }
};

}  // namespace kascade
