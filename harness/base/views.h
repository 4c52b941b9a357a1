/* views.h - SQL views over the results tables, so a user of the database
 * file gets the report's numbers without json_extract:
 *
 *   run_summary  one row per run: run_id, experiment_id, experiment,
 *                engine, variant (the report's base label: "ps ssp(2)",
 *                "allreduce ring/mpi"; settings swept within an
 *                experiment are not appended), options_json, transport,
 *                launcher, workers, servers, processes, repeat, seed,
 *                status, error, started_at, wall_s, batch, evals,
 *                final_acc, time_to_acc_085_s, samples_per_s,
 *                bytes_per_step, compute_s, comm_s, wait_s
 *   run_summary_throughput, run_summary_steps
 *                its parts: per run the worker step rows of the
 *                throughput window and their span; per run the busiest
 *                rank's bytes per step and the worker ranks' mean phase
 *                times.
 *
 * Every number has the definition of report.h; time_to_acc_085_s uses the
 * report's default target 0.85 (docs/results.md shows the query for
 * another one).
 */
#ifndef SG_VIEWS_H
#define SG_VIEWS_H

#include <sqlite3.h>

/* Ranks and steps say each rank's kind, 'worker' or 'hub' (schema
 * version 5; core/engine.h's role table): every view and query tells
 * hubs from workers by `kind`, never by a role's name.  Databases written
 * before version 5 have no kind; their hub roles were ps's "server" and
 * mapreduce's "driver", the only hubs then, and this expression gives
 * their rows the kind (the migration stores it; sg_views_ready shows it
 * to readers of a file that cannot be migrated).  Nothing else names
 * roles. */
#define SG_LEGACY_KIND_SQL "(CASE WHEN role IN ('server', 'driver') THEN 'hub' ELSE 'worker' END)"

/* Create the views in `db` (temp: as TEMP views of this connection, for
 * a database opened read-only).  A view whose stored definition differs
 * from this build's is replaced; one that matches is left alone, so
 * nothing is written when the views are current. */
int sg_views_install(sqlite3 *db, int temp);

/* Open the sgdlab database at `path` read-write and install the views.
 * A file that cannot be written, or is not an sgdlab database, is left
 * as it is and SG_OK returned: readers then use sg_views_install(db, 1). */
int sg_views_ensure(const char *path);

/* On a connection of any kind (read-only too): when the database's own
 * views are missing or differ from this build's, create them as TEMP
 * views of this connection (temp names are looked up first).  A file of
 * schema version < 5 (no kind column) also gets TEMP views `steps` and
 * `ranks` over its tables with kind from SG_LEGACY_KIND_SQL, so every
 * query of this connection reads kind alike. */
int sg_views_ready(sqlite3 *db);

#endif
