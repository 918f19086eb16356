// kernels/sparse_attention.h: exact attention over a chosen subset of key tiles (Kascade anchor and reuse layers).
// Each query row attends to the selected key tiles of its (KV head, query tile) plus its own diagonal tile
// (causally), with an exact softmax over exactly those keys. With shape.window a key outside the query's window is
// never attended, even inside a selected or the diagonal tile. Layouts: kernels/attention_types.h.
#pragma once

#include <cstdint>

#include "kernels/attention_types.h"
#include "kernels/decode_scoring.h"

namespace kascade {

/// Prefill (shape.n_q == shape.n_k, queries start at position 0). selection must have been made with the same tile.
/// head_map (may be null = identity): for KV head h of this layer, the KV head of `selection` whose tiles it uses
/// (the reuse layer's map onto its anchor); values in [0, selection.n_kv_heads).
void attn_sparse_prefill(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v,
                         const TileSelection& selection, const int32_t* head_map, float* out);

/// Token-level prefill (the paper's Kascade): each query row attends to the selected individual keys of its (mapped
/// KV head, query tile) plus the causal diagonal tile. The selected K/V rows are gathered per (KV head, query tile)
/// into contiguous blocks and go through the same score / online-softmax / value blocks as the dense kernel.
/// selection.tile must equal tile; head_map as above.
void attn_token_sparse_prefill(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v,
                               const TokenSelection& selection, const int32_t* head_map, float* out);

/// Decode (shape.n_q == 1, position n_k - 1): per KV head h, attend to the key tiles
/// tiles[h*max_k .. h*max_k + count[h]) (all strictly before the query's tile) plus the query's own, possibly
/// partial, tile. head_map as above.
void attn_sparse_decode(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, const int32_t* tiles,
                        const int32_t* count, int max_k, const int32_t* head_map, float* out);

/// Token-level decode (shape.n_q == 1, position n_k - 1): per KV head h, attend to the keys
/// keys[src*max_k .. src*max_k + count[src]) (src = head_map[h], or h; ascending, strictly before the query's tile)
/// that lie inside the query's window, plus the query's own, possibly partial, tile. The listed K/V rows are read in
/// place (detail::decode_pass_gathered).
void attn_token_sparse_decode(const AttnShape& shape, int tile, const float* q, KvPtr k, KvPtr v, const int32_t* keys,
                              const int32_t* count, int max_k, const int32_t* head_map, float* out);

/// attn_token_sparse_decode of a decode anchor over its own selection (no head map), with the scores its scoring pass
/// left in `scored` (decode_token_mass, or the dense + mass pass, on this call's q and K) instead of reading the
/// selected K rows again: only their V rows are read. The scores are the ones the mass was pooled from, so the result
/// is attn_token_sparse_decode's up to the order of each score's sums (and, after a pre-softmax pass, which scales in
/// natural units, the rounding of the change to log2 units). After a decode_token_mass given a rule, `selection` must
/// be the one that pass made (its counts are checked): the scores are then the ones it gathered for it.
void attn_token_sparse_decode_scored(const AttnShape& shape, int tile, const DecodeScoringScratch& scored, KvPtr v,
                                     const TokenSelection& selection, float* out);

/// attn_sparse_decode of a decode anchor over its own tile selection (no head map), with the scores its scoring pass
/// left in `scored` (decode_tile_mass, or the dense + tile mass pass), as attn_token_sparse_decode_scored: only the V
/// rows of the selected tiles and the query's own tile are read.
void attn_sparse_decode_scored(const AttnShape& shape, int tile, const DecodeScoringScratch& scored, KvPtr v,
                               const TileSelection& selection, float* out);

}  // namespace kascade
