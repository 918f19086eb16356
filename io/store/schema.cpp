// io/store/schema.cpp: the SQL of every schema migration of results/kascade.db (see schema.h).
#include "io/store/schema.h"

#include <array>

namespace kascade {

namespace {

// Version 1: everything. Parameters that only some methods have are NULL elsewhere; CHECKs keep the vocabulary
// closed so that a typo in a stage cannot create a new "method" that queries would silently miss. Run and schedule
// ids are AUTOINCREMENT: a replaced (--force) run gets a new id, so an id quoted in notes never changes meaning.
constexpr const char* kSchemaV1 = R"sql(
CREATE TABLE models (
    id          INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    path        TEXT NOT NULL,
    format      TEXT NOT NULL,
    model_type  TEXT NOT NULL,
    n_layers    INTEGER NOT NULL CHECK (n_layers > 0),
    n_heads     INTEGER NOT NULL CHECK (n_heads > 0),
    n_kv_heads  INTEGER NOT NULL CHECK (n_kv_heads > 0),
    head_dim    INTEGER NOT NULL CHECK (head_dim > 0),
    dim         INTEGER NOT NULL CHECK (dim > 0),
    vocab_size  INTEGER NOT NULL CHECK (vocab_size > 0),
    created_at  TEXT NOT NULL
);

CREATE TABLE texts (
    id          INTEGER PRIMARY KEY,
    hash        TEXT NOT NULL UNIQUE,
    path        TEXT NOT NULL,
    bytes       INTEGER NOT NULL CHECK (bytes >= 0),
    created_at  TEXT NOT NULL
);

CREATE TABLE artifacts (
    key             TEXT PRIMARY KEY,
    stage           TEXT NOT NULL CHECK (stage IN ('capture', 'similarity', 'schedule')),
    path            TEXT NOT NULL,
    model_id        INTEGER NOT NULL REFERENCES models(id),
    format_version  INTEGER NOT NULL CHECK (format_version > 0),
    params_json     TEXT NOT NULL,
    input_keys_json TEXT NOT NULL,
    bytes           INTEGER NOT NULL CHECK (bytes >= 0),
    created_at      TEXT NOT NULL
);
CREATE INDEX artifacts_stage ON artifacts(stage);

CREATE TABLE captures (
    artifact_key    TEXT PRIMARY KEY REFERENCES artifacts(key) ON DELETE CASCADE,
    model_id        INTEGER NOT NULL REFERENCES models(id),
    text_id         INTEGER NOT NULL REFERENCES texts(id),
    tokenizer_hash  TEXT NOT NULL,
    token_offset    INTEGER NOT NULL CHECK (token_offset >= 0),
    n_tokens        INTEGER NOT NULL CHECK (n_tokens > 0),
    ctx             INTEGER NOT NULL CHECK (ctx > 0),
    tile            INTEGER NOT NULL CHECK (tile > 0),
    save_qk         INTEGER NOT NULL CHECK (save_qk IN (0, 1))
);

CREATE TABLE similarities (
    artifact_key  TEXT PRIMARY KEY REFERENCES artifacts(key) ON DELETE CASCADE,
    capture_key   TEXT NOT NULL REFERENCES captures(artifact_key),
    topk_tiles    INTEGER CHECK (topk_tiles > 0),
    topk_pct      REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min         INTEGER CHECK (k_min >= 0),
    metrics_json  TEXT NOT NULL,
    CHECK ((topk_tiles IS NULL) <> (topk_pct IS NULL))
);
CREATE INDEX similarities_capture ON similarities(capture_key);

CREATE TABLE schedules (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    key              TEXT NOT NULL UNIQUE,
    similarity_key   TEXT REFERENCES similarities(artifact_key),
    model_id         INTEGER NOT NULL REFERENCES models(id),
    policy           TEXT NOT NULL CHECK (policy IN ('threshold', 'dp', 'fixed')),
    threshold        REAL,
    max_reuse_dist   INTEGER CHECK (max_reuse_dist > 0),
    n_anchors        INTEGER CHECK (n_anchors > 0),
    anchor_list      TEXT,
    metric           TEXT CHECK (metric IN ('recall', 'jaccard')),
    aggregation      TEXT CHECK (aggregation IN ('mean', 'min')),
    head_map         TEXT NOT NULL CHECK (head_map IN ('argmax', 'identity', 'pooled')),
    n_layers         INTEGER NOT NULL CHECK (n_layers > 0),
    n_anchor_layers  INTEGER NOT NULL CHECK (n_anchor_layers > 0),
    n_reuse_layers   INTEGER NOT NULL CHECK (n_reuse_layers >= 0),
    created_at       TEXT NOT NULL
);
CREATE INDEX schedules_similarity ON schedules(similarity_key);

CREATE TABLE schedule_layers (
    schedule_id    INTEGER NOT NULL REFERENCES schedules(id) ON DELETE CASCADE,
    layer          INTEGER NOT NULL CHECK (layer >= 0),
    role           TEXT NOT NULL CHECK (role IN ('dense', 'anchor', 'reuse')),
    anchor_layer   INTEGER CHECK (anchor_layer >= 0 AND anchor_layer < layer),
    head_map_json  TEXT,
    similarity     REAL,
    PRIMARY KEY (schedule_id, layer),
    CHECK ((role = 'reuse') = (anchor_layer IS NOT NULL))
);

CREATE TABLE runs (
    id             INTEGER PRIMARY KEY AUTOINCREMENT,
    key            TEXT NOT NULL UNIQUE,
    model_id       INTEGER NOT NULL REFERENCES models(id),
    text_id        INTEGER NOT NULL REFERENCES texts(id),
    schedule_id    INTEGER REFERENCES schedules(id),
    method         TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming')),
    tile           INTEGER CHECK (tile > 0),
    topk_tiles     INTEGER CHECK (topk_tiles > 0),
    topk_pct       REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min          INTEGER CHECK (k_min >= 0),
    sink_tokens    INTEGER CHECK (sink_tokens >= 0),
    window_tokens  INTEGER CHECK (window_tokens > 0),
    ctx            INTEGER NOT NULL CHECK (ctx > 0),
    token_offset   INTEGER NOT NULL CHECK (token_offset >= 0),
    n_tokens       INTEGER NOT NULL CHECK (n_tokens > 0),
    git_commit     TEXT NOT NULL,
    machine        TEXT NOT NULL,
    threads        INTEGER NOT NULL CHECK (threads > 0),
    started_at     TEXT NOT NULL,
    finished_at    TEXT NOT NULL,
    status         TEXT NOT NULL DEFAULT 'done' CHECK (status IN ('done')),
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL))
);
CREATE INDEX runs_schedule ON runs(schedule_id);
CREATE INDEX runs_model ON runs(model_id);

CREATE TABLE run_metrics (
    run_id           INTEGER PRIMARY KEY REFERENCES runs(id) ON DELETE CASCADE,
    n_scored         INTEGER NOT NULL CHECK (n_scored > 0),
    nll_dense        REAL,
    ppl_dense        REAL,
    nll_sparse       REAL NOT NULL,
    ppl_sparse       REAL NOT NULL,
    degradation_pct  REAL,
    density          REAL NOT NULL CHECK (density >= 0 AND density <= 1),
    tokens_per_s     REAL,
    attn_ms_dense    REAL,
    attn_ms_anchor   REAL,
    attn_ms_reuse    REAL,
    wall_s           REAL NOT NULL CHECK (wall_s >= 0)
);

CREATE TABLE run_layers (
    run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    layer          INTEGER NOT NULL CHECK (layer >= 0),
    role           TEXT NOT NULL CHECK (role IN ('dense', 'anchor', 'reuse', 'streaming')),
    anchor_layer   INTEGER CHECK (anchor_layer >= 0 AND anchor_layer < layer),
    density        REAL NOT NULL CHECK (density >= 0 AND density <= 1),
    attn_ms        REAL,
    out_rel_error  REAL,
    PRIMARY KEY (run_id, layer)
);

CREATE TABLE kernel_bench (
    id          INTEGER PRIMARY KEY,
    name        TEXT NOT NULL,
    shape_json  TEXT NOT NULL,
    threads     INTEGER NOT NULL CHECK (threads > 0),
    time_ms     REAL NOT NULL CHECK (time_ms >= 0),
    gflops      REAL,
    gbps        REAL,
    speedup     REAL,
    git_commit  TEXT NOT NULL,
    machine     TEXT NOT NULL,
    created_at  TEXT NOT NULL
);
CREATE INDEX kernel_bench_name ON kernel_bench(name);

-- One row per run with its parameters, schedule, metrics, model and text: most questions are one SELECT on it.
CREATE VIEW runs_flat AS
SELECT
    r.id, r.method, s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list, s.metric, s.aggregation,
    s.head_map, s.n_anchor_layers, s.n_reuse_layers,
    r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.sink_tokens, r.window_tokens, r.ctx, r.token_offset, r.n_tokens,
    m.n_scored, m.nll_dense, m.ppl_dense, m.nll_sparse, m.ppl_sparse, m.degradation_pct, m.density,
    m.tokens_per_s, m.attn_ms_dense, m.attn_ms_anchor, m.attn_ms_reuse, m.wall_s,
    md.path AS model_path, md.model_type, md.n_layers, md.hash AS model_hash,
    t.path AS text_path, t.hash AS text_hash,
    r.schedule_id, s.key AS schedule_key, s.similarity_key, r.key AS run_key,
    r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, r.status
FROM runs r
LEFT JOIN run_metrics m ON m.run_id = r.id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules s ON s.id = r.schedule_id;
)sql";

// Version 2: sweeps spread over processes and machines. A sweep and its jobs are recorded so that `kascade status`
// can count, per sweep, what is done without the sweep file; failures and submitted Slurm arrays say why a job is
// not. job_failures and slurm_arrays have natural unique keys so that merging shard databases never duplicates.
constexpr const char* kSchemaV2 = R"sql(
CREATE TABLE sweeps (
    key         TEXT PRIMARY KEY,
    file        TEXT NOT NULL,
    n_jobs      INTEGER NOT NULL CHECK (n_jobs > 0),
    created_at  TEXT NOT NULL
);

CREATE TABLE sweep_jobs (
    sweep_key   TEXT NOT NULL REFERENCES sweeps(key) ON DELETE CASCADE,
    job_index   INTEGER NOT NULL CHECK (job_index >= 0),
    stage       TEXT NOT NULL CHECK (stage IN ('capture', 'similarity', 'schedule', 'eval')),
    job_key     TEXT NOT NULL,
    label       TEXT NOT NULL,
    depends_on  TEXT NOT NULL,
    PRIMARY KEY (sweep_key, job_index)
);
CREATE INDEX sweep_jobs_key ON sweep_jobs(job_key);

CREATE TABLE job_failures (
    id          INTEGER PRIMARY KEY,
    sweep_key   TEXT NOT NULL,
    job_index   INTEGER NOT NULL CHECK (job_index >= 0),
    job_key     TEXT NOT NULL,
    machine     TEXT NOT NULL,
    error       TEXT NOT NULL,
    failed_at   TEXT NOT NULL,
    UNIQUE (sweep_key, job_index, machine, failed_at, error)
);

CREATE TABLE slurm_arrays (
    job_id        TEXT PRIMARY KEY,
    sweep_key     TEXT NOT NULL,
    level         INTEGER NOT NULL CHECK (level >= 0),
    job_indices   TEXT NOT NULL,
    script        TEXT NOT NULL,
    submitted_at  TEXT NOT NULL
);
CREATE INDEX slurm_arrays_sweep ON slurm_arrays(sweep_key);
)sql";

// Version 3: the selection variant of every sparse run (key granularity, k rule, round_k, pooling), shown in
// runs_flat. Runs stored before it were all tile-granularity, post-softmax, with the per-tile visible-context k rule.
constexpr const char* kSchemaV3 = R"sql(
ALTER TABLE runs ADD COLUMN key_granularity TEXT CHECK (key_granularity IN ('token', 'tile'));
ALTER TABLE runs ADD COLUMN k_rule TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible'));
ALTER TABLE runs ADD COLUMN round_k INTEGER CHECK (round_k >= 0);
ALTER TABLE runs ADD COLUMN pooling TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax'));
UPDATE runs SET key_granularity = 'tile', pooling = 'post_softmax', round_k = 0 WHERE method <> 'dense';
UPDATE runs SET k_rule = 'visible' WHERE method <> 'dense' AND topk_pct IS NOT NULL;

DROP VIEW runs_flat;
CREATE VIEW runs_flat AS
SELECT
    r.id, r.method, s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list, s.metric, s.aggregation,
    s.head_map, s.n_anchor_layers, s.n_reuse_layers,
    r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.key_granularity, r.k_rule, r.round_k, r.pooling,
    r.sink_tokens, r.window_tokens, r.ctx, r.token_offset, r.n_tokens,
    m.n_scored, m.nll_dense, m.ppl_dense, m.nll_sparse, m.ppl_sparse, m.degradation_pct, m.density,
    m.tokens_per_s, m.attn_ms_dense, m.attn_ms_anchor, m.attn_ms_reuse, m.wall_s,
    md.path AS model_path, md.model_type, md.n_layers, md.hash AS model_hash,
    t.path AS text_path, t.hash AS text_hash,
    r.schedule_id, s.key AS schedule_key, s.similarity_key, r.key AS run_key,
    r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, r.status
FROM runs r
LEFT JOIN run_metrics m ON m.run_id = r.id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules s ON s.id = r.schedule_id;
)sql";

// Version 4: decode-phase runs and the Quest baseline. runs gets phase (every earlier run was a prefill run), the
// prompt and decode token counts of decode runs and Quest's page size; runs.method and run_layers.role admit
// 'quest'. SQLite cannot change a CHECK in place, so both tables are rebuilt (same columns in the same order, new
// ones appended) with the ids and the AUTOINCREMENT counter kept; the migration runs with foreign keys off so that
// dropping the old tables cascades nowhere (ResultsDb::migrate checks the keys before committing).
constexpr const char* kSchemaV4 = R"sql(
DROP VIEW runs_flat;

CREATE TABLE runs_v4 (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    key              TEXT NOT NULL UNIQUE,
    model_id         INTEGER NOT NULL REFERENCES models(id),
    text_id          INTEGER NOT NULL REFERENCES texts(id),
    schedule_id      INTEGER REFERENCES schedules(id),
    method           TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming', 'quest')),
    tile             INTEGER CHECK (tile > 0),
    topk_tiles       INTEGER CHECK (topk_tiles > 0),
    topk_pct         REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min            INTEGER CHECK (k_min >= 0),
    sink_tokens      INTEGER CHECK (sink_tokens >= 0),
    window_tokens    INTEGER CHECK (window_tokens > 0),
    ctx              INTEGER NOT NULL CHECK (ctx > 0),
    token_offset     INTEGER NOT NULL CHECK (token_offset >= 0),
    n_tokens         INTEGER NOT NULL CHECK (n_tokens > 0),
    git_commit       TEXT NOT NULL,
    machine          TEXT NOT NULL,
    threads          INTEGER NOT NULL CHECK (threads > 0),
    started_at       TEXT NOT NULL,
    finished_at      TEXT NOT NULL,
    status           TEXT NOT NULL DEFAULT 'done' CHECK (status IN ('done')),
    key_granularity  TEXT CHECK (key_granularity IN ('token', 'tile')),
    k_rule           TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible')),
    round_k          INTEGER CHECK (round_k >= 0),
    pooling          TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax')),
    phase            TEXT NOT NULL DEFAULT 'prefill' CHECK (phase IN ('prefill', 'decode')),
    prompt_tokens    INTEGER CHECK (prompt_tokens > 0),
    decode_tokens    INTEGER CHECK (decode_tokens > 0),
    page_size        INTEGER CHECK (page_size > 0),
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL)),
    CHECK ((phase = 'decode') = (prompt_tokens IS NOT NULL AND decode_tokens IS NOT NULL)),
    CHECK ((method = 'quest') = (page_size IS NOT NULL)),
    CHECK (method <> 'quest' OR phase = 'decode')
);
INSERT INTO runs_v4 (id, key, model_id, text_id, schedule_id, method, tile, topk_tiles, topk_pct, k_min, sink_tokens,
                     window_tokens, ctx, token_offset, n_tokens, git_commit, machine, threads, started_at,
                     finished_at, status, key_granularity, k_rule, round_k, pooling, phase)
SELECT id, key, model_id, text_id, schedule_id, method, tile, topk_tiles, topk_pct, k_min, sink_tokens,
       window_tokens, ctx, token_offset, n_tokens, git_commit, machine, threads, started_at, finished_at, status,
       key_granularity, k_rule, round_k, pooling, 'prefill'
FROM runs;
-- Ids of replaced runs are never handed out again: carry the counter over (renaming the table renames its row).
DELETE FROM sqlite_sequence WHERE name = 'runs_v4';
INSERT INTO sqlite_sequence (name, seq) SELECT 'runs_v4', seq FROM sqlite_sequence WHERE name = 'runs';
DROP TABLE runs;
ALTER TABLE runs_v4 RENAME TO runs;
CREATE INDEX runs_schedule ON runs(schedule_id);
CREATE INDEX runs_model ON runs(model_id);

CREATE TABLE run_layers_v4 (
    run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    layer          INTEGER NOT NULL CHECK (layer >= 0),
    role           TEXT NOT NULL CHECK (role IN ('dense', 'anchor', 'reuse', 'streaming', 'quest')),
    anchor_layer   INTEGER CHECK (anchor_layer >= 0 AND anchor_layer < layer),
    density        REAL NOT NULL CHECK (density >= 0 AND density <= 1),
    attn_ms        REAL,
    out_rel_error  REAL,
    PRIMARY KEY (run_id, layer)
);
INSERT INTO run_layers_v4 SELECT run_id, layer, role, anchor_layer, density, attn_ms, out_rel_error FROM run_layers;
DROP TABLE run_layers;
ALTER TABLE run_layers_v4 RENAME TO run_layers;

CREATE VIEW runs_flat AS
SELECT
    r.id, r.method, r.phase, s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list, s.metric,
    s.aggregation, s.head_map, s.n_anchor_layers, s.n_reuse_layers,
    r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.key_granularity, r.k_rule, r.round_k, r.pooling,
    r.sink_tokens, r.window_tokens, r.page_size, r.ctx, r.prompt_tokens, r.decode_tokens, r.token_offset, r.n_tokens,
    m.n_scored, m.nll_dense, m.ppl_dense, m.nll_sparse, m.ppl_sparse, m.degradation_pct, m.density,
    m.tokens_per_s, m.attn_ms_dense, m.attn_ms_anchor, m.attn_ms_reuse, m.wall_s,
    md.path AS model_path, md.model_type, md.n_layers, md.hash AS model_hash,
    t.path AS text_path, t.hash AS text_hash,
    r.schedule_id, s.key AS schedule_key, s.similarity_key, r.key AS run_key,
    r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, r.status
FROM runs r
LEFT JOIN run_metrics m ON m.run_id = r.id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules s ON s.id = r.schedule_id;
)sql";

// Version 5: a checksum of every artifact file, compared before libhdf5 opens the file (a damaged HDF5 file may crash
// it). Artifacts stored before have none: their root attributes are still checked when they are opened.
constexpr const char* kSchemaV5 = R"sql(
ALTER TABLE artifacts ADD COLUMN checksum TEXT CHECK (checksum IS NULL OR length(checksum) = 16);
)sql";

// Version 6: long-context task runs (pipeline/stages/task_stage.h). A task run is a method (with its budget or
// schedule) on a task (with its seed and haystack, NULL text_id: the built-in filler); its samples are stored one
// by one as they finish, keyed by (length, depth, index), so a killed run resumes at the next sample and runs of
// more lengths or depths add to the same task run.
constexpr const char* kSchemaV6 = R"sql(
CREATE TABLE task_runs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    key              TEXT NOT NULL UNIQUE,
    model_id         INTEGER NOT NULL REFERENCES models(id),
    text_id          INTEGER REFERENCES texts(id),
    schedule_id      INTEGER REFERENCES schedules(id),
    task             TEXT NOT NULL CHECK (task IN ('passkey', 'niah_single', 'niah_multikey', 'niah_multivalue',
                                                   'niah_multiquery', 'variable_tracking')),
    metric           TEXT NOT NULL CHECK (metric IN ('number_match', 'string_match_all', 'string_match_part')),
    seed             INTEGER NOT NULL CHECK (seed >= 0),
    max_new_tokens   INTEGER NOT NULL CHECK (max_new_tokens > 0),
    prefill          TEXT NOT NULL CHECK (prefill IN ('sparse', 'dense')),
    method           TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming', 'quest')),
    tile             INTEGER CHECK (tile > 0),
    topk_tiles       INTEGER CHECK (topk_tiles > 0),
    topk_pct         REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min            INTEGER CHECK (k_min >= 0),
    k_rule           TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible')),
    round_k          INTEGER CHECK (round_k >= 0),
    key_granularity  TEXT CHECK (key_granularity IN ('token', 'tile')),
    pooling          TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax')),
    page_size        INTEGER CHECK (page_size > 0),
    git_commit       TEXT NOT NULL,
    machine          TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL)),
    CHECK ((method = 'quest') = (page_size IS NOT NULL))
);
CREATE INDEX task_runs_model ON task_runs(model_id);

CREATE TABLE task_samples (
    task_run_id           INTEGER NOT NULL REFERENCES task_runs(id) ON DELETE CASCADE,
    length                INTEGER NOT NULL CHECK (length > 0),
    depth_pct             REAL NOT NULL CHECK (depth_pct >= 0 AND depth_pct <= 100),
    sample_index          INTEGER NOT NULL CHECK (sample_index >= 0),
    needle_depth          REAL NOT NULL CHECK (needle_depth >= 0 AND needle_depth <= 1),
    expected_json         TEXT NOT NULL,
    generated             TEXT NOT NULL,
    score                 REAL NOT NULL CHECK (score >= 0 AND score <= 1),
    generated_tokens      INTEGER NOT NULL CHECK (generated_tokens >= 0),
    density               REAL NOT NULL CHECK (density >= 0 AND density <= 1),
    prefill_tokens_per_s  REAL,
    decode_tokens_per_s   REAL,
    threads               INTEGER NOT NULL CHECK (threads > 0),
    finished_at           TEXT NOT NULL,
    PRIMARY KEY (task_run_id, length, depth_pct, sample_index)
);

CREATE VIEW task_samples_flat AS
SELECT
    r.id AS task_run_id, r.task, r.metric, r.seed, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.max_new_tokens,
    s.length, s.depth_pct, s.sample_index, s.needle_depth, s.expected_json, s.generated, s.score, s.generated_tokens,
    s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads, s.finished_at,
    md.path AS model_path, md.hash AS model_hash, t.path AS haystack_path, r.key AS task_run_key, r.git_commit,
    r.machine
FROM task_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
LEFT JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;
)sql";

// Version 7: sweeps plan task jobs (a task run over a grid of lengths x depths x samples). A task job is done when
// every sample of its grid is stored, so its row keeps the grid (JSON); SQLite cannot widen a CHECK in place, so the
// table is copied.
constexpr const char* kSchemaV7 = R"sql(
CREATE TABLE sweep_jobs_v7 (
    sweep_key   TEXT NOT NULL REFERENCES sweeps(key) ON DELETE CASCADE,
    job_index   INTEGER NOT NULL CHECK (job_index >= 0),
    stage       TEXT NOT NULL CHECK (stage IN ('capture', 'similarity', 'schedule', 'eval', 'task')),
    job_key     TEXT NOT NULL,
    label       TEXT NOT NULL,
    depends_on  TEXT NOT NULL,
    task_grid   TEXT,
    CHECK ((stage = 'task') = (task_grid IS NOT NULL)),
    PRIMARY KEY (sweep_key, job_index)
);
INSERT INTO sweep_jobs_v7 (sweep_key, job_index, stage, job_key, label, depends_on)
    SELECT sweep_key, job_index, stage, job_key, label, depends_on FROM sweep_jobs;
DROP TABLE sweep_jobs;
ALTER TABLE sweep_jobs_v7 RENAME TO sweep_jobs;
CREATE INDEX sweep_jobs_key ON sweep_jobs(job_key);
)sql";

// Version 8: task runs on dataset files (pipeline/stages/dataset_task_stage.h). task_runs admits task 'dataset' (the
// dataset file is its text_id) with the dataset's name, the prompt length cap and the chat template, and the LongBench
// metrics; its samples, one per line of the file, go to dataset_samples with the middle cut of each prompt. SQLite
// cannot widen a CHECK in place, so task_runs is rebuilt as version 4 rebuilt runs (ids and counter kept).
constexpr const char* kSchemaV8 = R"sql(
DROP VIEW task_samples_flat;

CREATE TABLE task_runs_v8 (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    key              TEXT NOT NULL UNIQUE,
    model_id         INTEGER NOT NULL REFERENCES models(id),
    text_id          INTEGER REFERENCES texts(id),
    schedule_id      INTEGER REFERENCES schedules(id),
    task             TEXT NOT NULL CHECK (task IN ('passkey', 'niah_single', 'niah_multikey', 'niah_multivalue',
                                                   'niah_multiquery', 'variable_tracking', 'dataset')),
    metric           TEXT NOT NULL CHECK (metric IN ('number_match', 'string_match_all', 'string_match_part',
                                                     'qa_f1_score', 'rouge_score', 'classification_score',
                                                     'retrieval_score', 'count_score', 'code_sim_score',
                                                     'exact_match')),
    seed             INTEGER NOT NULL CHECK (seed >= 0),
    max_new_tokens   INTEGER NOT NULL CHECK (max_new_tokens > 0),
    prefill          TEXT NOT NULL CHECK (prefill IN ('sparse', 'dense')),
    method           TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming', 'quest')),
    tile             INTEGER CHECK (tile > 0),
    topk_tiles       INTEGER CHECK (topk_tiles > 0),
    topk_pct         REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min            INTEGER CHECK (k_min >= 0),
    k_rule           TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible')),
    round_k          INTEGER CHECK (round_k >= 0),
    key_granularity  TEXT CHECK (key_granularity IN ('token', 'tile')),
    pooling          TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax')),
    page_size        INTEGER CHECK (page_size > 0),
    git_commit       TEXT NOT NULL,
    machine          TEXT NOT NULL,
    created_at       TEXT NOT NULL,
    dataset_name     TEXT CHECK (length(dataset_name) > 0),
    max_length       INTEGER CHECK (max_length > 1),
    chat_template    TEXT CHECK (chat_template IN ('none', 'llama3', 'llama3.1', 'chatml', 'qwen2.5', 'qwen3',
                                                    'smollm2', 'mistral', 'llama2', 'zephyr', 'phi3')),
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL)),
    CHECK ((method = 'quest') = (page_size IS NOT NULL)),
    CHECK ((task = 'dataset') = (dataset_name IS NOT NULL)),
    CHECK ((task = 'dataset') = (max_length IS NOT NULL)),
    CHECK ((task = 'dataset') = (chat_template IS NOT NULL)),
    CHECK (task <> 'dataset' OR text_id IS NOT NULL)
);
INSERT INTO task_runs_v8 (id, key, model_id, text_id, schedule_id, task, metric, seed, max_new_tokens, prefill,
                          method, tile, topk_tiles, topk_pct, k_min, k_rule, round_k, key_granularity, pooling,
                          page_size, git_commit, machine, created_at)
SELECT id, key, model_id, text_id, schedule_id, task, metric, seed, max_new_tokens, prefill, method, tile, topk_tiles,
       topk_pct, k_min, k_rule, round_k, key_granularity, pooling, page_size, git_commit, machine, created_at
FROM task_runs;
DELETE FROM sqlite_sequence WHERE name = 'task_runs_v8';
INSERT INTO sqlite_sequence (name, seq) SELECT 'task_runs_v8', seq FROM sqlite_sequence WHERE name = 'task_runs';
DROP TABLE task_runs;
ALTER TABLE task_runs_v8 RENAME TO task_runs;
CREATE INDEX task_runs_model ON task_runs(model_id);

CREATE TABLE dataset_samples (
    task_run_id           INTEGER NOT NULL REFERENCES task_runs(id) ON DELETE CASCADE,
    sample_index          INTEGER NOT NULL CHECK (sample_index >= 0),
    sample_id             TEXT,
    prompt_tokens         INTEGER NOT NULL CHECK (prompt_tokens > 0),
    full_tokens           INTEGER NOT NULL CHECK (full_tokens >= prompt_tokens),
    cut_at                INTEGER CHECK (cut_at > 0 AND cut_at < prompt_tokens),
    answers_json          TEXT NOT NULL,
    generated             TEXT NOT NULL,
    score                 REAL NOT NULL CHECK (score >= 0 AND score <= 1),
    generated_tokens      INTEGER NOT NULL CHECK (generated_tokens >= 0),
    density               REAL NOT NULL CHECK (density >= 0 AND density <= 1),
    prefill_tokens_per_s  REAL,
    decode_tokens_per_s   REAL,
    threads               INTEGER NOT NULL CHECK (threads > 0),
    finished_at           TEXT NOT NULL,
    CHECK ((cut_at IS NULL) = (full_tokens = prompt_tokens)),
    PRIMARY KEY (task_run_id, sample_index)
);

CREATE VIEW task_samples_flat AS
SELECT
    r.id AS task_run_id, r.task, r.metric, r.seed, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.max_new_tokens,
    s.length, s.depth_pct, s.sample_index, s.needle_depth, s.expected_json, s.generated, s.score, s.generated_tokens,
    s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads, s.finished_at,
    md.path AS model_path, md.hash AS model_hash, t.path AS haystack_path, r.key AS task_run_key, r.git_commit,
    r.machine
FROM task_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
LEFT JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;

-- One row per dataset sample with its run's method and dataset: what `kascade query datasets` averages.
CREATE VIEW dataset_samples_flat AS
SELECT
    r.id AS task_run_id, r.dataset_name, r.metric, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.max_new_tokens, r.max_length, r.chat_template,
    s.sample_index, s.sample_id, s.prompt_tokens, s.full_tokens, s.cut_at, s.answers_json, s.generated, s.score,
    s.generated_tokens, s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads, s.finished_at,
    md.path AS model_path, md.hash AS model_hash, t.path AS dataset_path, t.hash AS dataset_hash,
    r.key AS task_run_key, r.git_commit, r.machine
FROM dataset_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;
)sql";

// Version 9: the OmniKV and LessIsMore decode baselines. runs and task_runs get their layer list (selection_layers,
// JSON: OmniKV's filter layers, LessIsMore's selection layers) and LessIsMore's window_ratio, and admit the two
// methods (decode only, like Quest); run_layers admits their layer roles 'filter' and 'selection'. The three tables
// are rebuilt as version 4 rebuilt runs (same columns in the same order, new ones appended, ids and AUTOINCREMENT
// counters kept). legacy_alter_table keeps each rename from re-checking the views that name the table
// (task_samples_flat, dataset_samples_flat), which name columns that still exist and so stay as they are; runs_flat
// is made again with the new columns.
constexpr const char* kSchemaV9 = R"sql(
PRAGMA legacy_alter_table = ON;
DROP VIEW runs_flat;

CREATE TABLE runs_v9 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    key               TEXT NOT NULL UNIQUE,
    model_id          INTEGER NOT NULL REFERENCES models(id),
    text_id           INTEGER NOT NULL REFERENCES texts(id),
    schedule_id       INTEGER REFERENCES schedules(id),
    method            TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming', 'quest', 'omnikv',
                                                      'lessismore')),
    tile              INTEGER CHECK (tile > 0),
    topk_tiles        INTEGER CHECK (topk_tiles > 0),
    topk_pct          REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min             INTEGER CHECK (k_min >= 0),
    sink_tokens       INTEGER CHECK (sink_tokens >= 0),
    window_tokens     INTEGER CHECK (window_tokens > 0),
    ctx               INTEGER NOT NULL CHECK (ctx > 0),
    token_offset      INTEGER NOT NULL CHECK (token_offset >= 0),
    n_tokens          INTEGER NOT NULL CHECK (n_tokens > 0),
    git_commit        TEXT NOT NULL,
    machine           TEXT NOT NULL,
    threads           INTEGER NOT NULL CHECK (threads > 0),
    started_at        TEXT NOT NULL,
    finished_at       TEXT NOT NULL,
    status            TEXT NOT NULL DEFAULT 'done' CHECK (status IN ('done')),
    key_granularity   TEXT CHECK (key_granularity IN ('token', 'tile')),
    k_rule            TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible')),
    round_k           INTEGER CHECK (round_k >= 0),
    pooling           TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax')),
    phase             TEXT NOT NULL DEFAULT 'prefill' CHECK (phase IN ('prefill', 'decode')),
    prompt_tokens     INTEGER CHECK (prompt_tokens > 0),
    decode_tokens     INTEGER CHECK (decode_tokens > 0),
    page_size         INTEGER CHECK (page_size > 0),
    selection_layers  TEXT CHECK (selection_layers LIKE '[%]'),
    window_ratio      REAL CHECK (window_ratio >= 0 AND window_ratio <= 1),
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL)),
    CHECK ((phase = 'decode') = (prompt_tokens IS NOT NULL AND decode_tokens IS NOT NULL)),
    CHECK ((method = 'quest') = (page_size IS NOT NULL)),
    CHECK (method NOT IN ('quest', 'omnikv', 'lessismore') OR phase = 'decode'),
    CHECK ((method IN ('omnikv', 'lessismore')) = (selection_layers IS NOT NULL)),
    CHECK ((method = 'lessismore') = (window_ratio IS NOT NULL))
);
INSERT INTO runs_v9 (id, key, model_id, text_id, schedule_id, method, tile, topk_tiles, topk_pct, k_min, sink_tokens,
                     window_tokens, ctx, token_offset, n_tokens, git_commit, machine, threads, started_at,
                     finished_at, status, key_granularity, k_rule, round_k, pooling, phase, prompt_tokens,
                     decode_tokens, page_size)
SELECT id, key, model_id, text_id, schedule_id, method, tile, topk_tiles, topk_pct, k_min, sink_tokens,
       window_tokens, ctx, token_offset, n_tokens, git_commit, machine, threads, started_at, finished_at, status,
       key_granularity, k_rule, round_k, pooling, phase, prompt_tokens, decode_tokens, page_size
FROM runs;
DELETE FROM sqlite_sequence WHERE name = 'runs_v9';
INSERT INTO sqlite_sequence (name, seq) SELECT 'runs_v9', seq FROM sqlite_sequence WHERE name = 'runs';
DROP TABLE runs;
ALTER TABLE runs_v9 RENAME TO runs;
CREATE INDEX runs_schedule ON runs(schedule_id);
CREATE INDEX runs_model ON runs(model_id);

CREATE TABLE run_layers_v9 (
    run_id         INTEGER NOT NULL REFERENCES runs(id) ON DELETE CASCADE,
    layer          INTEGER NOT NULL CHECK (layer >= 0),
    role           TEXT NOT NULL CHECK (role IN ('dense', 'anchor', 'reuse', 'streaming', 'quest', 'filter',
                                                 'selection')),
    anchor_layer   INTEGER CHECK (anchor_layer >= 0 AND anchor_layer < layer),
    density        REAL NOT NULL CHECK (density >= 0 AND density <= 1),
    attn_ms        REAL,
    out_rel_error  REAL,
    PRIMARY KEY (run_id, layer)
);
INSERT INTO run_layers_v9 SELECT run_id, layer, role, anchor_layer, density, attn_ms, out_rel_error FROM run_layers;
DROP TABLE run_layers;
ALTER TABLE run_layers_v9 RENAME TO run_layers;

CREATE TABLE task_runs_v9 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    key               TEXT NOT NULL UNIQUE,
    model_id          INTEGER NOT NULL REFERENCES models(id),
    text_id           INTEGER REFERENCES texts(id),
    schedule_id       INTEGER REFERENCES schedules(id),
    task              TEXT NOT NULL CHECK (task IN ('passkey', 'niah_single', 'niah_multikey', 'niah_multivalue',
                                                    'niah_multiquery', 'variable_tracking', 'dataset')),
    metric            TEXT NOT NULL CHECK (metric IN ('number_match', 'string_match_all', 'string_match_part',
                                                      'qa_f1_score', 'rouge_score', 'classification_score',
                                                      'retrieval_score', 'count_score', 'code_sim_score',
                                                      'exact_match')),
    seed              INTEGER NOT NULL CHECK (seed >= 0),
    max_new_tokens    INTEGER NOT NULL CHECK (max_new_tokens > 0),
    prefill           TEXT NOT NULL CHECK (prefill IN ('sparse', 'dense')),
    method            TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming', 'quest', 'omnikv',
                                                      'lessismore')),
    tile              INTEGER CHECK (tile > 0),
    topk_tiles        INTEGER CHECK (topk_tiles > 0),
    topk_pct          REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min             INTEGER CHECK (k_min >= 0),
    k_rule            TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible')),
    round_k           INTEGER CHECK (round_k >= 0),
    key_granularity   TEXT CHECK (key_granularity IN ('token', 'tile')),
    pooling           TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax')),
    page_size         INTEGER CHECK (page_size > 0),
    git_commit        TEXT NOT NULL,
    machine           TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    dataset_name      TEXT CHECK (length(dataset_name) > 0),
    max_length        INTEGER CHECK (max_length > 1),
    chat_template     TEXT CHECK (chat_template IN ('none', 'llama3', 'llama3.1', 'chatml', 'qwen2.5', 'qwen3',
                                                     'smollm2', 'mistral', 'llama2', 'zephyr', 'phi3')),
    selection_layers  TEXT CHECK (selection_layers LIKE '[%]'),
    window_ratio      REAL CHECK (window_ratio >= 0 AND window_ratio <= 1),
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL)),
    CHECK ((method = 'quest') = (page_size IS NOT NULL)),
    CHECK ((task = 'dataset') = (dataset_name IS NOT NULL)),
    CHECK ((task = 'dataset') = (max_length IS NOT NULL)),
    CHECK ((task = 'dataset') = (chat_template IS NOT NULL)),
    CHECK (task <> 'dataset' OR text_id IS NOT NULL),
    CHECK ((method IN ('omnikv', 'lessismore')) = (selection_layers IS NOT NULL)),
    CHECK ((method = 'lessismore') = (window_ratio IS NOT NULL))
);
INSERT INTO task_runs_v9 (id, key, model_id, text_id, schedule_id, task, metric, seed, max_new_tokens, prefill,
                          method, tile, topk_tiles, topk_pct, k_min, k_rule, round_k, key_granularity, pooling,
                          page_size, git_commit, machine, created_at, dataset_name, max_length, chat_template)
SELECT id, key, model_id, text_id, schedule_id, task, metric, seed, max_new_tokens, prefill, method, tile, topk_tiles,
       topk_pct, k_min, k_rule, round_k, key_granularity, pooling, page_size, git_commit, machine, created_at,
       dataset_name, max_length, chat_template
FROM task_runs;
DELETE FROM sqlite_sequence WHERE name = 'task_runs_v9';
INSERT INTO sqlite_sequence (name, seq) SELECT 'task_runs_v9', seq FROM sqlite_sequence WHERE name = 'task_runs';
DROP TABLE task_runs;
ALTER TABLE task_runs_v9 RENAME TO task_runs;
CREATE INDEX task_runs_model ON task_runs(model_id);

CREATE VIEW runs_flat AS
SELECT
    r.id, r.method, r.phase, s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list, s.metric,
    s.aggregation, s.head_map, s.n_anchor_layers, s.n_reuse_layers,
    r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.key_granularity, r.k_rule, r.round_k, r.pooling,
    r.sink_tokens, r.window_tokens, r.page_size, r.selection_layers, r.window_ratio, r.ctx, r.prompt_tokens,
    r.decode_tokens, r.token_offset, r.n_tokens,
    m.n_scored, m.nll_dense, m.ppl_dense, m.nll_sparse, m.ppl_sparse, m.degradation_pct, m.density,
    m.tokens_per_s, m.attn_ms_dense, m.attn_ms_anchor, m.attn_ms_reuse, m.wall_s,
    md.path AS model_path, md.model_type, md.n_layers, md.hash AS model_hash,
    t.path AS text_path, t.hash AS text_hash,
    r.schedule_id, s.key AS schedule_key, s.similarity_key, r.key AS run_key,
    r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, r.status
FROM runs r
LEFT JOIN run_metrics m ON m.run_id = r.id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules s ON s.id = r.schedule_id;
PRAGMA legacy_alter_table = OFF;
)sql";

// Version 10: the numerics of the matrix products a run was measured with (--matmul: exact, or bf16 with
// activations rounded to BF16), in runs and task_runs; every run stored before is exact. The three flat views are made
// again with it (the task views also gain the OmniKV and LessIsMore columns of version 9).
constexpr const char* kSchemaV10 = R"sql(
ALTER TABLE runs ADD COLUMN matmul TEXT NOT NULL DEFAULT 'exact' CHECK (matmul IN ('exact', 'bf16'));
ALTER TABLE task_runs ADD COLUMN matmul TEXT NOT NULL DEFAULT 'exact' CHECK (matmul IN ('exact', 'bf16'));
DROP VIEW runs_flat;
DROP VIEW task_samples_flat;
DROP VIEW dataset_samples_flat;

CREATE VIEW runs_flat AS
SELECT
    r.id, r.method, r.phase, s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list, s.metric,
    s.aggregation, s.head_map, s.n_anchor_layers, s.n_reuse_layers,
    r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.key_granularity, r.k_rule, r.round_k, r.pooling,
    r.sink_tokens, r.window_tokens, r.page_size, r.selection_layers, r.window_ratio, r.matmul, r.ctx, r.prompt_tokens,
    r.decode_tokens, r.token_offset, r.n_tokens,
    m.n_scored, m.nll_dense, m.ppl_dense, m.nll_sparse, m.ppl_sparse, m.degradation_pct, m.density,
    m.tokens_per_s, m.attn_ms_dense, m.attn_ms_anchor, m.attn_ms_reuse, m.wall_s,
    md.path AS model_path, md.model_type, md.n_layers, md.hash AS model_hash,
    t.path AS text_path, t.hash AS text_hash,
    r.schedule_id, s.key AS schedule_key, s.similarity_key, r.key AS run_key,
    r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, r.status
FROM runs r
LEFT JOIN run_metrics m ON m.run_id = r.id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules s ON s.id = r.schedule_id;

CREATE VIEW task_samples_flat AS
SELECT
    r.id AS task_run_id, r.task, r.metric, r.seed, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.selection_layers, r.window_ratio, r.matmul, r.max_new_tokens,
    s.length, s.depth_pct, s.sample_index, s.needle_depth, s.expected_json, s.generated, s.score, s.generated_tokens,
    s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads, s.finished_at,
    md.path AS model_path, md.hash AS model_hash, t.path AS haystack_path, r.key AS task_run_key, r.git_commit,
    r.machine
FROM task_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
LEFT JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;

CREATE VIEW dataset_samples_flat AS
SELECT
    r.id AS task_run_id, r.dataset_name, r.metric, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.selection_layers, r.window_ratio, r.matmul, r.max_new_tokens, r.max_length, r.chat_template,
    s.sample_index, s.sample_id, s.prompt_tokens, s.full_tokens, s.cut_at, s.answers_json, s.generated, s.score,
    s.generated_tokens, s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads, s.finished_at,
    md.path AS model_path, md.hash AS model_hash, t.path AS dataset_path, t.hash AS dataset_hash,
    r.key AS task_run_key, r.git_commit, r.machine
FROM dataset_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;
)sql";

// Version 11: the element type of the KV cache a run was measured with (--kv-dtype: f32, or bf16 with keys and values
// rounded to BF16 as they are stored), in runs and task_runs; every run stored before had an fp32 cache. The flat
// views show it through kFlatViews.
constexpr const char* kSchemaV11 = R"sql(
ALTER TABLE runs ADD COLUMN kv_dtype TEXT NOT NULL DEFAULT 'f32' CHECK (kv_dtype IN ('f32', 'bf16'));
ALTER TABLE task_runs ADD COLUMN kv_dtype TEXT NOT NULL DEFAULT 'f32' CHECK (kv_dtype IN ('f32', 'bf16'));
)sql";

// Version 12: how many samples a task sample was decoded together with (--batch; itself included). The answers do not
// depend on it (a batched decode computes each sequence as a decode of it alone), its decode tokens/s does. Every
// sample stored before was decoded alone.
constexpr const char* kSchemaV12 = R"sql(
ALTER TABLE task_samples ADD COLUMN batch INTEGER NOT NULL DEFAULT 1 CHECK (batch >= 1);
ALTER TABLE dataset_samples ADD COLUMN batch INTEGER NOT NULL DEFAULT 1 CHECK (batch >= 1);
)sql";

// Version 13: task_runs.chat_template admits 'qwen3-no-thinking' (Qwen3's template with enable_thinking=false). SQLite
// cannot widen a CHECK in place, so task_runs is rebuilt as version 8 rebuilt it: the same columns in the same order
// (version 9's table with version 10's matmul and version 11's kv_dtype appended), ids and AUTOINCREMENT counter kept.
// The two views that name task_runs are dropped first (kFlatViews makes them again), so the rename checks no view.
constexpr const char* kSchemaV13 = R"sql(
DROP VIEW IF EXISTS task_samples_flat;
DROP VIEW IF EXISTS dataset_samples_flat;

CREATE TABLE task_runs_v13 (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    key               TEXT NOT NULL UNIQUE,
    model_id          INTEGER NOT NULL REFERENCES models(id),
    text_id           INTEGER REFERENCES texts(id),
    schedule_id       INTEGER REFERENCES schedules(id),
    task              TEXT NOT NULL CHECK (task IN ('passkey', 'niah_single', 'niah_multikey', 'niah_multivalue',
                                                    'niah_multiquery', 'variable_tracking', 'dataset')),
    metric            TEXT NOT NULL CHECK (metric IN ('number_match', 'string_match_all', 'string_match_part',
                                                      'qa_f1_score', 'rouge_score', 'classification_score',
                                                      'retrieval_score', 'count_score', 'code_sim_score',
                                                      'exact_match')),
    seed              INTEGER NOT NULL CHECK (seed >= 0),
    max_new_tokens    INTEGER NOT NULL CHECK (max_new_tokens > 0),
    prefill           TEXT NOT NULL CHECK (prefill IN ('sparse', 'dense')),
    method            TEXT NOT NULL CHECK (method IN ('kascade', 'dense', 'oracle', 'streaming', 'quest', 'omnikv',
                                                      'lessismore')),
    tile              INTEGER CHECK (tile > 0),
    topk_tiles        INTEGER CHECK (topk_tiles > 0),
    topk_pct          REAL CHECK (topk_pct > 0 AND topk_pct <= 100),
    k_min             INTEGER CHECK (k_min >= 0),
    k_rule            TEXT CHECK (k_rule IN ('sequence', 'rolling', 'visible')),
    round_k           INTEGER CHECK (round_k >= 0),
    key_granularity   TEXT CHECK (key_granularity IN ('token', 'tile')),
    pooling           TEXT CHECK (pooling IN ('post_softmax', 'pre_softmax')),
    page_size         INTEGER CHECK (page_size > 0),
    git_commit        TEXT NOT NULL,
    machine           TEXT NOT NULL,
    created_at        TEXT NOT NULL,
    dataset_name      TEXT CHECK (length(dataset_name) > 0),
    max_length        INTEGER CHECK (max_length > 1),
    chat_template     TEXT CHECK (chat_template IN ('none', 'llama3', 'llama3.1', 'chatml', 'qwen2.5', 'qwen3',
                                                     'qwen3-no-thinking', 'smollm2', 'mistral', 'llama2', 'zephyr',
                                                     'phi3')),
    selection_layers  TEXT CHECK (selection_layers LIKE '[%]'),
    window_ratio      REAL CHECK (window_ratio >= 0 AND window_ratio <= 1),
    matmul            TEXT NOT NULL DEFAULT 'exact' CHECK (matmul IN ('exact', 'bf16')),
    kv_dtype          TEXT NOT NULL DEFAULT 'f32' CHECK (kv_dtype IN ('f32', 'bf16')),
    CHECK ((method = 'kascade') = (schedule_id IS NOT NULL)),
    CHECK ((method = 'quest') = (page_size IS NOT NULL)),
    CHECK ((task = 'dataset') = (dataset_name IS NOT NULL)),
    CHECK ((task = 'dataset') = (max_length IS NOT NULL)),
    CHECK ((task = 'dataset') = (chat_template IS NOT NULL)),
    CHECK (task <> 'dataset' OR text_id IS NOT NULL),
    CHECK ((method IN ('omnikv', 'lessismore')) = (selection_layers IS NOT NULL)),
    CHECK ((method = 'lessismore') = (window_ratio IS NOT NULL))
);
INSERT INTO task_runs_v13 (id, key, model_id, text_id, schedule_id, task, metric, seed, max_new_tokens, prefill,
                           method, tile, topk_tiles, topk_pct, k_min, k_rule, round_k, key_granularity, pooling,
                           page_size, git_commit, machine, created_at, dataset_name, max_length, chat_template,
                           selection_layers, window_ratio, matmul, kv_dtype)
SELECT id, key, model_id, text_id, schedule_id, task, metric, seed, max_new_tokens, prefill, method, tile, topk_tiles,
       topk_pct, k_min, k_rule, round_k, key_granularity, pooling, page_size, git_commit, machine, created_at,
       dataset_name, max_length, chat_template, selection_layers, window_ratio, matmul, kv_dtype
FROM task_runs;
DELETE FROM sqlite_sequence WHERE name = 'task_runs_v13';
INSERT INTO sqlite_sequence (name, seq) SELECT 'task_runs_v13', seq FROM sqlite_sequence WHERE name = 'task_runs';
DROP TABLE task_runs;
ALTER TABLE task_runs_v13 RENAME TO task_runs;
CREATE INDEX task_runs_model ON task_runs(model_id);
)sql";

// The flat views of the latest version, made again after every migration (flat_views_sql()): from version 11 on a
// migration changes tables only, and a new column reaches the views by an edit here instead of a copy of all three.
constexpr const char* kFlatViews = R"sql(
DROP VIEW IF EXISTS runs_flat;
DROP VIEW IF EXISTS task_samples_flat;
DROP VIEW IF EXISTS dataset_samples_flat;

CREATE VIEW runs_flat AS
SELECT
    r.id, r.method, r.phase, s.policy, s.threshold, s.max_reuse_dist, s.n_anchors, s.anchor_list, s.metric,
    s.aggregation, s.head_map, s.n_anchor_layers, s.n_reuse_layers,
    r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.key_granularity, r.k_rule, r.round_k, r.pooling,
    r.sink_tokens, r.window_tokens, r.page_size, r.selection_layers, r.window_ratio, r.matmul, r.kv_dtype, r.ctx,
    r.prompt_tokens, r.decode_tokens, r.token_offset, r.n_tokens,
    m.n_scored, m.nll_dense, m.ppl_dense, m.nll_sparse, m.ppl_sparse, m.degradation_pct, m.density,
    m.tokens_per_s, m.attn_ms_dense, m.attn_ms_anchor, m.attn_ms_reuse, m.wall_s,
    md.path AS model_path, md.model_type, md.n_layers, md.hash AS model_hash,
    t.path AS text_path, t.hash AS text_hash,
    r.schedule_id, s.key AS schedule_key, s.similarity_key, r.key AS run_key,
    r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, r.status
FROM runs r
LEFT JOIN run_metrics m ON m.run_id = r.id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules s ON s.id = r.schedule_id;

CREATE VIEW task_samples_flat AS
SELECT
    r.id AS task_run_id, r.task, r.metric, r.seed, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.selection_layers, r.window_ratio, r.matmul, r.kv_dtype, r.max_new_tokens,
    s.length, s.depth_pct, s.sample_index, s.needle_depth, s.expected_json, s.generated, s.score, s.generated_tokens,
    s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads, s.batch, s.finished_at,
    md.path AS model_path, md.hash AS model_hash, t.path AS haystack_path, r.key AS task_run_key, r.git_commit,
    r.machine
FROM task_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
LEFT JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;

CREATE VIEW dataset_samples_flat AS
SELECT
    r.id AS task_run_id, r.dataset_name, r.metric, r.prefill, r.method, sc.policy, sc.n_anchors, sc.anchor_list,
    r.schedule_id, r.tile, r.topk_tiles, r.topk_pct, r.k_min, r.k_rule, r.round_k, r.key_granularity, r.pooling,
    r.page_size, r.selection_layers, r.window_ratio, r.matmul, r.kv_dtype, r.max_new_tokens, r.max_length,
    r.chat_template, s.sample_index, s.sample_id, s.prompt_tokens, s.full_tokens, s.cut_at, s.answers_json,
    s.generated, s.score, s.generated_tokens, s.density, s.prefill_tokens_per_s, s.decode_tokens_per_s, s.threads,
    s.batch, s.finished_at, md.path AS model_path, md.hash AS model_hash, t.path AS dataset_path, t.hash AS dataset_hash,
    r.key AS task_run_key, r.git_commit, r.machine
FROM dataset_samples s
JOIN task_runs r ON r.id = s.task_run_id
JOIN models md ON md.id = r.model_id
JOIN texts t ON t.id = r.text_id
LEFT JOIN schedules sc ON sc.id = r.schedule_id;
)sql";

constexpr std::array kMigrations = {
    Migration{1, "create models, texts, artifacts, captures, similarities, schedules, runs, kernel_bench, runs_flat",
              kSchemaV1},
    Migration{2, "add sweeps, sweep_jobs, job_failures, slurm_arrays", kSchemaV2},
    Migration{3, "runs: key_granularity, k_rule, round_k, pooling (also in runs_flat)", kSchemaV3},
    Migration{4, "runs: phase, prompt_tokens, decode_tokens, page_size, method quest (also in runs_flat)", kSchemaV4},
    Migration{5, "artifacts: checksum", kSchemaV5},
    Migration{6, "add task_runs, task_samples, task_samples_flat", kSchemaV6},
    Migration{7, "sweep_jobs: stage task, task_grid", kSchemaV7},
    Migration{8,
              "task_runs: task dataset, dataset_name, max_length, chat_template, LongBench metrics; add "
              "dataset_samples, dataset_samples_flat",
              kSchemaV8},
    Migration{9,
              "runs, task_runs: methods omnikv and lessismore, selection_layers, window_ratio (also in runs_flat); "
              "run_layers: roles filter and selection",
              kSchemaV9},
    Migration{10, "runs, task_runs: matmul (also in runs_flat, task_samples_flat, dataset_samples_flat)", kSchemaV10},
    Migration{11, "runs, task_runs: kv_dtype", kSchemaV11},
    Migration{12, "task_samples, dataset_samples: batch", kSchemaV12},
    Migration{13, "task_runs: chat_template qwen3-no-thinking", kSchemaV13},
};
static_assert(kMigrations.back().version == kSchemaVersion, "the last migration must reach kSchemaVersion");

}  // namespace

std::span<const Migration> schema_migrations() {
    return kMigrations;
}

const char* flat_views_sql() {
    return kFlatViews;
}

}  // namespace kascade
