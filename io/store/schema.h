// io/store/schema.h: the versioned schema of results/kascade.db as an ordered list of forward migrations.
//
// PRAGMA user_version holds the version a database is at. Migration N takes a database from version N-1 to N and
// is frozen once released: to change the schema, append a migration, never edit an old one. results/README.md
// documents the tables of the latest version.
#pragma once

#include <span>

namespace kascade {

/// The schema version this kascade creates and reads; equals the version of the last migration.
inline constexpr int kSchemaVersion = 13;

struct Migration {
    int version;              ///< user_version after applying it
    const char* description;  ///< one line, for logs
    const char* sql;          ///< statements run in one transaction
};

/// All migrations in ascending version order, up to kSchemaVersion. (Version 4, runs.phase, comes with issue 13's
/// decode work; a database is taken to each later version in turn, so the two merge in either order.)
std::span<const Migration> schema_migrations();

/// Drops and makes again the flat views of the latest version (runs_flat, task_samples_flat, dataset_samples_flat).
/// Run it after migrating a database forward: views hold no data, so from version 11 on they are defined once, for
/// the latest tables, instead of being copied into every migration that adds a column (versions up to 10 did).
const char* flat_views_sql();

}  // namespace kascade
