#include "kernels/matmul.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>
#include <iterator>
#include <memory>
#include <new>
#include <type_traits>
#include <utility>
#include <vector>

#include "base/cache_aligned.h"
#include "base/error.h"
#include "kernels/matmul_simd.h"

namespace kascade {

namespace mm = detail::matmul;

const char* matrix_type_name(MatrixType type) {
    switch (type) {
        case MatrixType::F32:
            return "f32";
        case MatrixType::BF16:
            return "bf16";
        case MatrixType::F16:
            return "f16";
    }
    return "?";
}

size_t matrix_type_size(MatrixType type) {
    return type == MatrixType::F32 ? 4 : 2;
}

const char* matmul_path() {
    return mm::kPathName;
}

namespace {

/// Products below this many multiply-adds and this many bytes of weights run on the calling thread: a parallel
/// region costs a few microseconds, and far more when the other cores are busy. The byte rule is for decode, which
/// is bound by memory bandwidth: one thread alone does not draw all of it.
constexpr double kParallelMinMacs = 1 << 20;
constexpr double kParallelMinWeightBytes = 256 << 10;
/// Bytes of activations one work unit sweeps per weight panel (an L2-sized block: each panel's weights stay in L1
/// while the block's activation rows stream from L2).
constexpr size_t kActivationBlockBytes = 512 << 10;
/// Bytes of weights per work unit, read once from memory and then kept in L2 across the unit's activation blocks.
constexpr size_t kWeightGroupBytes = 192 << 10;
/// Activation rows from which the rounding to BF16 is shared by the threads.
constexpr int kParallelRoundingMinRows = 64;
/// Work units per thread, enough for dynamic scheduling to even out the threads (also when another process takes a
/// core for a while).
constexpr int kUnitsPerThread = 8;
/// Panels a decode batch's work unit runs column block by column block at a time (compute_batch_panels): their batch
/// tiles keep their accumulators in memory between the blocks, 1.5 KB per half panel on AVX-512 and 512 bytes on AVX2
/// (24 KB and 8 KB for 8 panels, on the stack, in L1 beside the block of activation rows).
constexpr int kBatchPanels = 8;

/// A panel of BF16 (exact products) or F16 weights that this many micro-tiles or more use (prefill) is widened to fp32
/// once, into the thread's buffer, and its tiles run the fp32 kernel on it: widening in every tile took two
/// instructions per 16 weights and row on the ports the multiply-adds use, and SmolLM2's products at 2048 rows ran
/// at 154-166 GFLOP/s from BF16 weights against 181-208 from fp32 ones (2-vCPU Xeon, bench/README.md). Bitwise the
/// same results: the widening is exact and the multiply-adds run in the same order.
constexpr int kWidenMinTiles = 4;

/// Frees the 64-byte aligned scratch buffer of the converted activations.
struct AlignedFree {
    void operator()(mm::ActBf16* p) const { ::operator delete[](p, std::align_val_t(64)); }
};

/// The weight rows of all targets cut into panels of kPanelRows rows (a panel never straddles two targets).
struct PanelIndex {
    std::vector<int> first_panel;  ///< per target, then the total

    explicit PanelIndex(std::span<const MatmulTarget> targets) {
        first_panel.reserve(targets.size() + 1);
        int total = 0;
        for (const MatmulTarget& t : targets) {
            first_panel.push_back(total);
            total += (t.w.rows + mm::kPanelRows - 1) / mm::kPanelRows;
        }
        first_panel.push_back(total);
    }
    int count() const { return first_panel.back(); }
    /// Target of global panel p.
    int target_of(int p) const {
        return static_cast<int>(std::upper_bound(first_panel.begin(), first_panel.end(), p) - first_panel.begin()) - 1;
    }
};

/// Work units: groups of consecutive panels x blocks of activation rows, group-major, so that consecutive units
/// reuse the group's weights from L2.
struct WorkPlan {
    int panels_per_group = 1;
    int rows_per_block = 1;  ///< a multiple of kTileRows
    int groups = 0, blocks = 0;

    WorkPlan(int n, int panels, size_t activation_row_bytes, size_t panel_bytes, int threads) {
        const int tiles = (n + mm::kTileRows - 1) / mm::kTileRows;
        int tiles_per_block =
            std::clamp(static_cast<int>(kActivationBlockBytes / activation_row_bytes / mm::kTileRows), 1, tiles);
        blocks = (tiles + tiles_per_block - 1) / tiles_per_block;
        panels_per_group = std::max<int>(1, static_cast<int>(kWeightGroupBytes / std::max<size_t>(panel_bytes, 1)));
        const int wanted_units = kUnitsPerThread * threads;
        if (threads > 1) {
            const int wanted_groups = (wanted_units + blocks - 1) / blocks;
            panels_per_group = std::clamp(panels / wanted_groups, 1, panels_per_group);
            groups = (panels + panels_per_group - 1) / panels_per_group;
            // Few weight rows (e.g. a 7-row matrix): split the activation rows further.
            if (groups * blocks < wanted_units) blocks = std::min(tiles, (wanted_units + groups - 1) / groups);
        }
        groups = (panels + panels_per_group - 1) / panels_per_group;
        tiles_per_block = (tiles + blocks - 1) / blocks;
        blocks = (tiles + tiles_per_block - 1) / tiles_per_block;
        rows_per_block = tiles_per_block * mm::kTileRows;
    }
    int units() const { return groups * blocks; }
};

/// What a call computes: the shared inputs and the targets.
struct Problem {
    const float* x;             ///< [n][cols] fp32 activations
    const mm::ActBf16* x_bf16;  ///< [n][padded_cols] activations rounded to BF16 (BF16 weights, Bf16), or null
    size_t bf16_stride;
    int n, cols;
    std::span<const MatmulTarget> targets;
};

/// Pointers to the N (kPanelRows) weight rows from `row0` (rows past the matrix repeat its last row; their results are
/// discarded).
template <typename Element, int N = mm::kPanelRows>
void panel_rows(const MatrixView& w, int row0, const Element* (&rows)[N]) {
    const auto* data = static_cast<const Element*>(w.data);
    for (int j = 0; j < N; ++j) rows[j] = data + static_cast<size_t>(std::min(row0 + j, w.rows - 1)) * w.cols;
}

/// Rows [r0, r0 + MR) of x against the NR weight rows from `row0` of target t; `widened` (or null): the panel's
/// rows already widened to fp32, kPanelRows rows of stride `widened_stride` (a one-row tile, the last of a block, then
/// requests the lines after the buffer as its "next panel": harmless, requests never fault).
template <int MR, int NR>
void compute_tile(const Problem& p, const MatmulTarget& t, int r0, int row0, const float* widened,
                  size_t widened_stride, float* out) {
    if (widened != nullptr) {
        const float* rows[mm::kPanelRows];
        for (int j = 0; j < mm::kPanelRows; ++j) rows[j] = widened + j * widened_stride;
        mm::dot_tile_f32<MR, NR>(p.x + static_cast<size_t>(r0) * p.cols, p.cols, rows, p.cols, out);
        return;
    }
    if (t.w.type == MatrixType::F32) {
        const float* rows[mm::kPanelRows];
        panel_rows(t.w, row0, rows);
        mm::dot_tile_f32<MR, NR>(p.x + static_cast<size_t>(r0) * p.cols, p.cols, rows, p.cols, out);
        return;
    }
    const uint16_t* rows[mm::kPanelRows];
    panel_rows(t.w, row0, rows);
    if (t.w.type == MatrixType::F16) {
        mm::dot_tile_f16<MR, NR>(p.x + static_cast<size_t>(r0) * p.cols, p.cols, rows, p.cols, out);
    } else if (p.x_bf16 != nullptr) {  // BF16 weights, MatmulPrecision::Bf16
        mm::dot_tile_bf16<MR, NR>(p.x_bf16 + static_cast<size_t>(r0) * p.bf16_stride, p.bf16_stride, rows, p.cols, out);
    } else {  // BF16 weights, exact
        mm::dot_tile_bf16_exact<MR, NR>(p.x + static_cast<size_t>(r0) * p.cols, p.cols, rows, p.cols, out);
    }
}

/// Whether target t's weights are widened in the tiles (BF16 with exact products, F16): see kWidenMinTiles.
bool widens_in_tiles(const Problem& p, const MatmulTarget& t) {
    return t.w.type == MatrixType::F16 || (t.w.type == MatrixType::BF16 && p.x_bf16 == nullptr);
}

/// Calls f(std::integral_constant<int, R>{}) for the R in [First, First + Count) that equals rows (the micro-tiles'
/// row counts are template arguments).
template <int First, int Count, typename F>
void with_tile_rows(int rows, F f) {
    [&]<int... I>(std::integer_sequence<int, I...>) {
        ((rows == First + I ? f(std::integral_constant<int, First + I>{}) : void()), ...);
    }
    (std::make_integer_sequence<int, Count>());
}

/// out[r][j] (row stride nr) -> y rows [r0, r0 + tile_rows) x columns [col0, col0 + cols) of target t, plus its bias.
void store_tile(const MatmulTarget& t, const float* out, int nr, int r0, int tile_rows, int col0, int cols) {
    const size_t y_stride = t.y_stride > 0 ? t.y_stride : t.w.rows;
    for (int r = 0; r < tile_rows; ++r) {
        float* y = t.y + static_cast<size_t>(r0 + r) * y_stride + col0;
        const float* o = out + r * nr;
        if (t.bias != nullptr) {
            for (int j = 0; j < cols; ++j) y[j] = o[j] + t.bias[col0 + j];
        } else {
            for (int j = 0; j < cols; ++j) y[j] = o[j];
        }
    }
}

/// y rows [r_begin, r_end) x weight rows [row0, row0 + kPanelRows) of target t. widen_buffer (or null): room for the
/// panel widened to fp32, kPanelRows rows of stride widen_stride.
void compute_panel(const Problem& p, const MatmulTarget& t, int row0, int r_begin, int r_end, float* widen_buffer,
                   size_t widen_stride) {
    const int n_rows = std::min(mm::kPanelRows, t.w.rows - row0);
    const float* widened = nullptr;
    if (widen_buffer != nullptr && widens_in_tiles(p, t) && r_end - r_begin >= kWidenMinTiles * mm::kTileRows) {
        const uint16_t* rows[mm::kPanelRows];
        panel_rows(t.w, row0, rows);
        for (int j = 0; j < mm::kPanelRows; ++j)
            mm::widen_row(rows[j], p.cols, t.w.type == MatrixType::F16, widen_buffer + j * widen_stride);
        widened = widen_buffer;
    }
    float out[mm::kTileOutputs];
    for (int r0 = r_begin; r0 < r_end; r0 += mm::kTileRows) {
        const int tile_rows = std::min(mm::kTileRows, r_end - r0);
        with_tile_rows<1, mm::kTileRows>(tile_rows, [&](auto mr) {
            compute_tile<decltype(mr)::value, mm::kPanelRows>(p, t, r0, row0, widened, widen_stride, out);
        });
        store_tile(t, out, mm::kPanelRows, r0, tile_rows, row0, n_rows);
    }
}

#if KASCADE_MATMUL_BATCH_TILE
/// Whether a block of this many activation rows runs as batch tiles (compute_batch_panels).
bool is_decode_batch(int rows) {
    return rows > mm::kTileRows && rows <= mm::kBatchTileRows;
}

/// How target t's weights go through a batch tile.
mm::BatchWeights batch_weights(const Problem& p, const MatmulTarget& t) {
    switch (t.w.type) {
        case MatrixType::F32:
            return mm::BatchWeights::F32;
        case MatrixType::F16:
            return mm::BatchWeights::F16;
        case MatrixType::BF16:
            return p.x_bf16 != nullptr ? mm::BatchWeights::Bf16 : mm::BatchWeights::Bf16Exact;
    }
    return mm::BatchWeights::F32;
}

/// The MR activation rows from r_begin (a decode batch) against panels [p_begin, p_end) (at most kBatchPanels): each
/// half panel is one batch tile, and all of them run a column block (kBatchColumnBlock) at a time, so that the block of
/// the activation rows stays in L1 while the weights stream past it. Each tile requests the weights of the tile after
/// it (the next half panel's rows at the same columns; the last tile the first one's next block).
template <int MR>
void compute_batch_panels(const Problem& p, const PanelIndex& panels, int p_begin, int p_end, int r_begin) {
    struct HalfPanel {
        const MatmulTarget* target;
        int row0, n_rows;
        mm::BatchWeights weights;
        const void* rows[mm::kBatchPanelRows];  ///< as panel_rows gives them
    };
    constexpr int kMaxHalves = 2 * kBatchPanels;
    static_assert(mm::kPanelRows == 2 * mm::kBatchPanelRows);
    HalfPanel halves[kMaxHalves];
    int n_halves = 0;
    int t = panels.target_of(p_begin);
    for (int panel = p_begin; panel < p_end; ++panel) {
        while (panel >= panels.first_panel[t + 1]) ++t;
        const MatmulTarget& target = p.targets[t];
        const int panel_row0 = (panel - panels.first_panel[t]) * mm::kPanelRows;
        const int rows_in_panel = std::min(mm::kPanelRows, target.w.rows - panel_row0);
        for (int half = 0; half < rows_in_panel; half += mm::kBatchPanelRows) {
            KASCADE_ASSERT(n_halves < kMaxHalves);
            HalfPanel& h = halves[n_halves++];
            h.target = &target;
            h.row0 = panel_row0 + half;
            h.n_rows = std::min(mm::kBatchPanelRows, rows_in_panel - half);
            h.weights = batch_weights(p, target);
            if (target.w.type == MatrixType::F32) {
                const float* rows[mm::kBatchPanelRows];
                panel_rows(target.w, h.row0, rows);
                std::copy(std::begin(rows), std::end(rows), h.rows);
            } else {
                const uint16_t* rows[mm::kBatchPanelRows];
                panel_rows(target.w, h.row0, rows);
                std::copy(std::begin(rows), std::end(rows), h.rows);
            }
        }
    }
    const float* x = p.x + static_cast<size_t>(r_begin) * p.cols;
    const mm::ActBf16* x_bf16 = p.x_bf16 != nullptr ? p.x_bf16 + static_cast<size_t>(r_begin) * p.bf16_stride : nullptr;
    mm::BatchTile tiles[kMaxHalves];
    for (int c0 = 0; c0 < p.cols; c0 += mm::kBatchColumnBlock) {
        const int c1 = std::min(p.cols, c0 + mm::kBatchColumnBlock);
        for (int h = 0; h < n_halves; ++h) {
            if (c0 == 0) tiles[h] = mm::BatchTile{};
            const HalfPanel& half = halves[h];
            const bool wraps = h + 1 == n_halves;  // the tile after the last one is the first, in the next block
            const HalfPanel& after = halves[wraps ? 0 : h + 1];
            const size_t skip = wraps ? mm::kBatchColumnBlock * matrix_type_size(after.target->w.type) : 0;
            const char* next[mm::kBatchPanelRows];
            for (int j = 0; j < mm::kBatchPanelRows; ++j) next[j] = static_cast<const char*>(after.rows[j]) + skip;
            // BF16 products read the activations rounded to BF16, every other kind the fp32 ones.
            const bool bf16 = half.weights == mm::BatchWeights::Bf16;
            const void* xs = bf16 ? static_cast<const void*>(x_bf16) : x;
            const size_t stride = bf16 ? p.bf16_stride : p.cols;
            const auto span = [&](auto weights) {
                mm::batch_span<MR, decltype(weights)::value>(xs, stride, half.rows, p.cols, c0, c1, tiles[h], next);
            };
            switch (half.weights) {
                case mm::BatchWeights::F32:
                    span(std::integral_constant<mm::BatchWeights, mm::BatchWeights::F32>{});
                    break;
                case mm::BatchWeights::F16:
                    span(std::integral_constant<mm::BatchWeights, mm::BatchWeights::F16>{});
                    break;
                case mm::BatchWeights::Bf16Exact:
                    span(std::integral_constant<mm::BatchWeights, mm::BatchWeights::Bf16Exact>{});
                    break;
                case mm::BatchWeights::Bf16:
                    span(std::integral_constant<mm::BatchWeights, mm::BatchWeights::Bf16>{});
                    break;
            }
        }
    }
    float out[mm::kTileOutputs];
    for (int h = 0; h < n_halves; ++h) {
        mm::reduce_batch_tile<MR>(tiles[h], out);
        store_tile(*halves[h].target, out, mm::kBatchPanelRows, r_begin, MR, halves[h].row0, halves[h].n_rows);
    }
}
#endif

void compute_unit(const Problem& p, const PanelIndex& panels, const WorkPlan& plan, int unit, float* widen_buffer,
                  size_t widen_stride) {
    const int group = unit / plan.blocks, block = unit % plan.blocks;
    const int p_begin = group * plan.panels_per_group;
    const int p_end = std::min(panels.count(), p_begin + plan.panels_per_group);
    const int r_begin = block * plan.rows_per_block;
    const int r_end = std::min(p.n, r_begin + plan.rows_per_block);
#if KASCADE_MATMUL_BATCH_TILE
    if (is_decode_batch(r_end - r_begin)) {
        with_tile_rows<mm::kTileRows + 1, mm::kBatchTileRows - mm::kTileRows>(r_end - r_begin, [&](auto mr) {
            for (int first = p_begin; first < p_end; first += kBatchPanels)
                compute_batch_panels<decltype(mr)::value>(p, panels, first, std::min(p_end, first + kBatchPanels),
                                                          r_begin);
        });
        return;
    }
#endif
    int t = panels.target_of(p_begin);
    for (int panel = p_begin; panel < p_end; ++panel) {
        while (panel >= panels.first_panel[t + 1]) ++t;
        compute_panel(p, p.targets[t], (panel - panels.first_panel[t]) * mm::kPanelRows, r_begin, r_end, widen_buffer,
                      widen_stride);
    }
}

}  // namespace

void matmul(const float* x, int n, std::span<const MatmulTarget> targets, MatmulPrecision precision) {
    KASCADE_ASSERT(n >= 0);
    if (n == 0 || targets.empty()) return;
    const int cols = targets[0].w.cols;
    KASCADE_ASSERT(cols > 0 && x != nullptr);
    bool any_bf16 = false;
    double macs = 0, weight_bytes = 0;
    size_t max_panel_bytes = 0;
    for (const MatmulTarget& t : targets) {
        KASCADE_ASSERT(t.w.cols == cols && t.w.rows >= 0);
        KASCADE_ASSERT(t.w.rows == 0 || (t.w.data != nullptr && t.y != nullptr));
        KASCADE_ASSERT(t.y_stride == 0 || t.y_stride >= t.w.rows);
        any_bf16 = any_bf16 || (t.w.type == MatrixType::BF16 && precision == MatmulPrecision::Bf16);
        macs += static_cast<double>(n) * cols * t.w.rows;
        weight_bytes += static_cast<double>(cols) * t.w.rows * matrix_type_size(t.w.type);
        max_panel_bytes = std::max(max_panel_bytes, mm::kPanelRows * cols * matrix_type_size(t.w.type));
    }
    const PanelIndex panels(targets);
    if (panels.count() == 0) return;

    const int padded_cols = (cols + mm::kActBf16Cols - 1) / mm::kActBf16Cols * mm::kActBf16Cols;
    std::unique_ptr<mm::ActBf16[], AlignedFree> x_bf16;
    if (any_bf16) {
        const size_t bytes = static_cast<size_t>(n) * padded_cols * sizeof(mm::ActBf16);
        x_bf16.reset(static_cast<mm::ActBf16*>(::operator new[](bytes, std::align_val_t(64))));
    }
    const Problem problem{x, x_bf16.get(), static_cast<size_t>(padded_cols), n, cols, targets};

    const bool tiny = macs < kParallelMinMacs && weight_bytes < kParallelMinWeightBytes;
    const int threads = tiny ? 1 : omp_get_max_threads();
    const size_t activation_row_bytes = any_bf16 ? padded_cols * sizeof(mm::ActBf16) : cols * sizeof(float);
    const WorkPlan plan(n, panels.count(), activation_row_bytes, max_panel_bytes, threads);
    const bool widen_panels =
        plan.rows_per_block >= kWidenMinTiles * mm::kTileRows &&
        std::any_of(targets.begin(), targets.end(), [&](const MatmulTarget& t) { return widens_in_tiles(problem, t); });
    const size_t widen_stride = (cols + 15) / 16 * 16;  // each widened row starts on a cache line

    auto round_rows = [&](int r0, int r1) {
        for (int r = r0; r < r1; ++r) {
            mm::round_row_bf16(x + static_cast<size_t>(r) * cols, cols,
                               x_bf16.get() + static_cast<size_t>(r) * padded_cols, padded_cols);
        }
    };
    // A few rows (decode) are rounded before the parallel region: one barrier less, which matters when a thread
    // has to wait for a core.
    const bool round_in_region = any_bf16 && n >= kParallelRoundingMinRows;
    if (any_bf16 && !round_in_region) round_rows(0, n);

#pragma omp parallel num_threads(threads)
    {
        CacheAlignedVector<float> widen_buffer(widen_panels ? mm::kPanelRows * widen_stride : 0);
        if (round_in_region) {
#pragma omp for schedule(static)
            for (int r = 0; r < n; ++r) round_rows(r, r + 1);
        }
        // Units are independent (each output element is computed whole by one unit), so their assignment to
        // threads does not change any result.
#pragma omp for schedule(dynamic, 1)
        for (int unit = 0; unit < plan.units(); ++unit)
            compute_unit(problem, panels, plan, unit, widen_panels ? widen_buffer.data() : nullptr, widen_stride);
    }
}

void matmul(const float* x, int n, const MatrixView& w, const float* bias, float* y, MatmulPrecision precision) {
    const MatmulTarget target{w, bias, y, 0};
    matmul(x, n, std::span<const MatmulTarget>(&target, 1), precision);
}

}  // namespace kascade
