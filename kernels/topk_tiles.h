// kernels/topk_tiles.h: choosing the k best key tiles per (KV head, query tile).
#pragma once

#include "kernels/attention_types.h"

namespace kascade {

/// Number of key tiles query tile q_tile keeps under `rule` (0 for the first tile, never more than q_tile).
int topk_tile_budget(const TopKRule& rule, int q_tile, int tile);

/// Per (KV head, query tile): the topk_tile_budget() highest-scoring key tiles strictly before the diagonal,
/// returned in ascending tile order. Ties go to the lower tile index, so the result is deterministic.
TileSelection select_topk_tiles(const TileMass& scores, const TopKRule& rule);

}  // namespace kascade
