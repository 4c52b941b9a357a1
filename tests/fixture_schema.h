/* fixture_schema.h - the tables of a version-1 results database, for the
 * report tests' hand-made fixtures: the reports, views and exports must
 * read a database that an older sgdlab wrote (the recorder migrates only
 * when it opens a file to write). */
#ifndef SG_FIXTURE_SCHEMA_H
#define SG_FIXTURE_SCHEMA_H

static const char SCHEMA[] =
    "CREATE TABLE experiments(id INTEGER PRIMARY KEY, name TEXT NOT NULL,"
    " config_text TEXT, started_at TEXT, host TEXT, version TEXT);"
    "CREATE TABLE runs(id INTEGER PRIMARY KEY, experiment_id INTEGER,"
    " engine TEXT NOT NULL, options_json TEXT, transport TEXT, launcher TEXT,"
    " workers INTEGER, servers INTEGER, processes INTEGER, repeat INTEGER, seed INTEGER,"
    " status TEXT NOT NULL, error TEXT, started_at TEXT, finished_at TEXT, wall_s REAL);"
    "CREATE TABLE steps(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, step INTEGER,"
    " epoch INTEGER, t_start REAL, compute_s REAL, comm_s REAL, wait_s REAL,"
    " bytes_sent INTEGER, bytes_recv INTEGER, loss REAL, staleness INTEGER);"
    "CREATE TABLE evals(run_id INTEGER NOT NULL, step INTEGER, epoch INTEGER, wall_s REAL,"
    " samples INTEGER, train_loss REAL, test_loss REAL, test_acc REAL);"
    "CREATE TABLE bench(id INTEGER PRIMARY KEY, experiment_id INTEGER,"
    " collective TEXT, impl TEXT, transport TEXT, np INTEGER, bytes INTEGER, iters INTEGER,"
    " t_min REAL, t_median REAL, t_max REAL, algbw REAL, busbw REAL, wrong INTEGER);"
    "CREATE TABLE ranks(run_id INTEGER NOT NULL, rank INTEGER, role TEXT, host TEXT, pid INTEGER);"
    "CREATE TABLE run_info(run_id INTEGER NOT NULL, key TEXT, value TEXT);";

#endif
