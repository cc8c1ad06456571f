// Command capgate-plugin-subscription is the subscription plugin: a public
// catalogue of plans and users' subscriptions to them, with the
// capabilities subscription.plans, subscription.list, subscription.get,
// subscription.subscribe and subscription.cancel, all in the subscription
// pack. It provides the catalogue entity type subscription.plan to search.
//
// The host starts it; its data lives in <data_dir>/subscription.db
// (SQLite), or in PostgreSQL when dsn is set. Config block:
//
//	config:
//	  seed: demo   # on first start, load demo plans and subscriptions
//	  dsn: postgres://user:pass@host:5432/db   # optional: PostgreSQL, shareable by replicas
package main
