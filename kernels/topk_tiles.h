// kernels/topk_tiles.h: choosing the k best key tiles, or the k best individual keys, per (KV head, query tile).
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"

namespace kascade {

/// k in tokens that `rule` gives query tile q_tile of a sequence of n_keys keys, before the granularity and the
/// candidate cap: tiles * tile for a fixed tile count, else the KRule formula (attention_types.h) rounded up to a
/// multiple of rule.round_k; never negative. window as AttnShape::effective_window() (0 = none).
int64_t topk_key_count(const TopKRule& rule, int q_tile, int tile, int n_keys, int window = 0);

/// Key tiles query tile q_tile keeps: topk_key_count() rounded up to whole tiles, never more than its candidates, the
/// key tiles before it that hold a key inside the window (q_tile - first_window_tile(q_tile, tile, window); q_tile
/// without a window, so 0 for the first tile).
int topk_tile_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window = 0);

/// Individual keys query tile q_tile keeps: topk_key_count(), never more than its candidates, the keys
/// first_window_key(q_tile, tile, window) .. q_tile * tile - 1.
int topk_token_budget(const TopKRule& rule, int q_tile, int tile, int n_keys, int window = 0);

/// Per (KV head, query tile): the topk_tile_budget() highest-scoring candidate key tiles (strictly before the
/// diagonal, inside scores.window), returned in ascending tile order. Ties go to the lower tile index, so the result
/// is deterministic. Needs scores.n_keys.
TileSelection select_topk_tiles(const TileMass& scores, const TopKRule& rule);

/// Per (KV head, query tile): the topk_token_budget() highest-scoring candidate keys, ascending; ties to the lower
/// key index, NaN ranked lowest.
TokenSelection select_topk_tokens(const TokenMass& scores, const TopKRule& rule);

}  // namespace kascade
