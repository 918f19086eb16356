// kernels/topk_tiles.h: choosing the k best key tiles per (KV head, query tile).
#pragma once

#include "kernels/attention_types.h"

namespace kascade {

/// Number of key tiles query tile q_tile keeps under `rule`: never more than its candidates, the key tiles before it
/// that hold a key inside the window (q_tile - first_window_tile(q_tile, tile, window); q_tile without a window, so 0
/// for the first tile). With a window the pct rule takes pct% of the window-limited context min(window, (q_tile+1) *
/// tile). window as AttnShape::effective_window() (0 = none).
int topk_tile_budget(const TopKRule& rule, int q_tile, int tile, int window = 0);

/// Per (KV head, query tile): the topk_tile_budget() highest-scoring candidate key tiles (strictly before the
/// diagonal, inside scores.window), returned in ascending tile order. Ties go to the lower tile index, so the result
/// is deterministic.
TileSelection select_topk_tiles(const TileMass& scores, const TopKRule& rule);

}  // namespace kascade
