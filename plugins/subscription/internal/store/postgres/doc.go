// Package postgres is the PostgreSQL implementation of store.Store, on pgx v5
// (pgxpool).
//
// It runs the same schema history as the SQLite store (package migrations,
// postgres/ directory) with times as timestamptz, stored in UTC and
// truncated to whole seconds like SQLite's text times, so both stores return
// equal results. Several replicas may share one database; every race is
// settled by PostgreSQL, never by a lock in this process:
//
//   - one active subscription per plan and user: the partial unique index
//     subscriptions_one_active_per_plan; the loser gets an
//     *store.AlreadySubscribedError naming the winner;
//   - a subscription cancelled once: the UPDATE matches only a row in the
//     state the cancel changes, and under READ COMMITTED a second UPDATE
//     waits for the first and then no longer matches;
//   - a seed applied once: its transaction first locks the subscription_seeds table
//     (EXCLUSIVE, readers still pass), so concurrent seeds run one after the
//     other and the later one sees the earlier one's rows.
//
// Constraint violations map to the store errors by SQLSTATE and constraint
// name (pgconn.PgError).
package postgres
