// kascade query: read the results database (runs, any SQL, one run in full). Read-only by construction.
#include <cstdio>
#include <sstream>

#include "base/error.h"
#include "io/store/results_db.h"
#include "io/store/table_format.h"
#include "pipeline/cli/commands.h"

namespace kascade::cli {

namespace {

struct QueryArgs {
    std::string format = "table";
    RunsQuery runs;
    std::string columns;
    std::string sql;
    int64_t run_id = 0;
    std::string task_where;
    std::string dataset_where;
    bool by_depth = false;
};

std::filesystem::path db_file(const CommonOptions& common) {
    const std::filesystem::path file = std::filesystem::path(common.results_dir) / ResultsDb::kFileName;
    KASCADE_CHECK(std::filesystem::exists(file),
                  "no results database at \"{}\" (run a stage or a sweep first, or "
                  "pass --results DIR)",
                  file.string());
    // A database that another kascade is still creating (schema version 0) is waited for and completed first, so
    // that the query sees every table; no result changes. Older versions have every table a query reads.
    if (ResultsDb(common.results_dir, DbAccess::ReadOnly).schema_version() == 0) {
        ResultsDb created(common.results_dir);
    }
    return file;
}

void print(const QueryResult& result, const std::string& format) {
    write_result(stdout, result, parse_output_format(format));
}

std::string quote_sql(int64_t v) {
    return std::to_string(v);
}

void show_run(QueryDb& db, int64_t id, const std::string& format) {
    const QueryResult run = db.select("SELECT * FROM runs_flat WHERE id = " + quote_sql(id));
    KASCADE_CHECK(!run.rows.empty(), "no run with id {}", id);
    // One run is easier to read as field/value pairs than as one very wide row.
    QueryResult fields;
    fields.columns = {"field", "value"};
    for (size_t c = 0; c < run.columns.size(); ++c) fields.rows.push_back({run.columns[c], run.rows[0][c]});
    std::printf("run %lld\n", static_cast<long long>(id));
    print(fields, format);
    std::printf("\nlayers\n");
    print(
        db.select("SELECT layer, role, anchor_layer, density, attn_ms, out_rel_error FROM run_layers WHERE run_id = " +
                  quote_sql(id) + " ORDER BY layer"),
        format);
    const QueryResult schedule = db.select(
        "SELECT l.layer, l.role, l.anchor_layer, l.head_map_json, l.similarity FROM runs r "
        "JOIN schedule_layers l ON l.schedule_id = r.schedule_id WHERE r.id = " +
        quote_sql(id) + " ORDER BY l.layer");
    if (!schedule.rows.empty()) {
        std::printf("\nschedule\n");
        print(schedule, format);
    }
    std::printf("\nprovenance\n");
    print(db.select("SELECT r.key AS run_key, r.git_commit, r.machine, r.threads, r.started_at, r.finished_at, "
                    "m.path AS model_path, m.hash AS model_hash, t.path AS text_path, t.hash AS text_hash, "
                    "s.key AS schedule_key, s.similarity_key, sim.capture_key "
                    "FROM runs r JOIN models m ON m.id = r.model_id JOIN texts t ON t.id = r.text_id "
                    "LEFT JOIN schedules s ON s.id = r.schedule_id "
                    "LEFT JOIN similarities sim ON sim.artifact_key = s.similarity_key WHERE r.id = " +
                    quote_sql(id)),
          format);
}

}  // namespace

void register_query_command(CLI::App& app, const CommonOptions& common) {
    auto args = std::make_shared<QueryArgs>();
    CLI::App* cmd = app.add_subcommand("query", "Read the results database");
    cmd->require_subcommand(1);
    cmd->footer(
        "Examples:\n"
        "  kascade query runs --where \"degradation_pct < 1\" --order-by density\n"
        "  kascade query runs --format csv > runs.csv\n"
        "  kascade query sql \"SELECT method, avg(density) FROM runs_flat GROUP BY method\"\n"
        "  kascade query show 7\n"
        "  kascade query tasks --where \"task = 'passkey' AND method = 'streaming'\" --by-depth\n"
        "  kascade query datasets --where \"dataset_name = 'qasper'\"");
    auto add_format = [&](CLI::App* sub) {
        sub->add_option("--format,-f", args->format, "table | csv | json | markdown")->capture_default_str();
    };

    CLI::App* runs = cmd->add_subcommand("runs", "List runs (the runs_flat view)");
    runs->add_option("--where", args->runs.where, "SQL condition on runs_flat columns, e.g. \"density < 0.3\"");
    runs->add_option("--order-by", args->runs.order_by, "column(s) to sort by, e.g. \"degradation_pct desc\"");
    runs->add_option("--columns", args->columns, "comma-separated runs_flat columns (default: a summary set)");
    runs->add_option("--limit", args->runs.limit, "at most this many rows");
    add_format(runs);
    runs->callback([args, &common] {
        if (!args->columns.empty()) {
            std::stringstream ss(args->columns);
            std::string col;
            while (std::getline(ss, col, ',')) args->runs.columns.push_back(col);
        }
        QueryDb db(db_file(common));
        print(query_runs(db, args->runs), args->format);
    });

    CLI::App* sql = cmd->add_subcommand("sql", "Run one read-only SQL statement");
    sql->add_option("statement", args->sql, "e.g. \"SELECT * FROM runs_flat WHERE method = 'oracle'\"")->required();
    add_format(sql);
    sql->callback([args, &common] {
        QueryDb db(db_file(common));
        print(db.select(args->sql), args->format);
    });

    CLI::App* tasks = cmd->add_subcommand("tasks", "Mean task scores per task run and prompt length");
    tasks->add_option("--where", args->task_where,
                      "SQL condition on task_samples_flat columns, e.g. \"task = 'passkey' AND depth_pct >= 50\"");
    tasks->add_flag("--by-depth", args->by_depth, "one row per needle depth too (the needle heatmap's cells)");
    add_format(tasks);
    tasks->callback([args, &common] {
        QueryDb db(db_file(common));
        print(query_task_scores(db, args->task_where, args->by_depth), args->format);
    });

    CLI::App* datasets = cmd->add_subcommand("datasets", "Mean scores per dataset task run (kascade task --dataset)");
    datasets->add_option("--where", args->dataset_where,
                         "SQL condition on dataset_samples_flat columns, e.g. \"dataset_name = 'qasper'\"");
    add_format(datasets);
    datasets->callback([args, &common] {
        QueryDb db(db_file(common));
        print(query_dataset_scores(db, args->dataset_where), args->format);
    });

    CLI::App* show = cmd->add_subcommand("show", "One run with its schedule, per-layer table and provenance");
    show->add_option("run_id", args->run_id, "run id (the id column of `query runs`)")->required();
    add_format(show);
    show->callback([args, &common] {
        QueryDb db(db_file(common));
        show_run(db, args->run_id, args->format);
    });
}

}  // namespace kascade::cli
