package approvals

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/jackc/pgx/v5/stdlib"

	"github.com/capgate/capgate/host/internal/audit"
	"github.com/capgate/capgate/internal/registry"
	"github.com/capgate/capgate/sdk/sqlstore"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// HistoryTable records the store's applied migrations, apart from the
// other stores' in a shared PostgreSQL schema.
const HistoryTable = "capgate_approvals_migrations"

// FileName is the SQLite file Open keeps in the data directory.
const FileName = "approvals.db"

// Bounds of what a request holds.
const (
	// MaxArgs is the most bytes of arguments a request keeps: the gate
	// has already held them to the capability's schema, so this only
	// stops a store from taking more than any call can send.
	MaxArgs = 1 << 20
	// MaxReason is the most bytes of a decider's reason.
	MaxReason = 1000
	// MaxField bounds a principal's fields and a capability's name.
	MaxField = 255
)

// Lease is how long a run may hold a request before a sweep counts the
// run as lost (see Sweep). Calls end far sooner: the host bounds each
// request.
const Lease = 10 * time.Minute

// Errors a caller tells apart with errors.Is.
var (
	ErrInvalid  = errors.New("invalid approval request")
	ErrNotFound = errors.New("no such approval request")
	// ErrDecided: the request is no longer pending (decided, expired or
	// run); the wrapping message says which.
	ErrDecided = errors.New("approval request already decided")
	// ErrSelfApproval: the decider asked for the call (four eyes).
	ErrSelfApproval = errors.New("a request may not be decided by the user who made it")
)

// Status is where a request is in its life.
type Status string

const (
	Pending  Status = "pending"
	Approved Status = "approved" // approved, not yet run
	Rejected Status = "rejected"
	Expired  Status = "expired"
	Running  Status = "running"
	Done     Status = "done" // ran, or could not: Outcome says
)

// OutcomeKind is what came of running an approved call.
type OutcomeKind string

const (
	OutcomeResult    OutcomeKind = "result"     // Result holds the call's result
	OutcomeToolError OutcomeKind = "tool_error" // Message holds the tool error
	OutcomeRefused   OutcomeKind = "refused"    // the gate refused it at its run; Message says why
	OutcomeFailed    OutcomeKind = "failed"     // an internal failure, or a run lost with its host
)

// Outcome is what came of running an approved call.
type Outcome struct {
	Kind    OutcomeKind
	Result  []byte // OutcomeResult: the result's JSON
	Message string // the others: what the caller is told
}

// Request is a call the gate held.
type Request struct {
	// TokenLabel, Role, Scope and UserID are the principal who called.
	TokenLabel, Role, Scope, UserID string
	Capability                      string
	// Args are the arguments exactly as the caller sent them.
	Args []byte
	Risk registry.Risk
	// TTL is how long the request waits for a decision.
	TTL time.Duration
}

func (r Request) validate() error {
	for _, f := range []struct{ name, v string }{{"token label", r.TokenLabel}, {"role", r.Role}, {"scope", r.Scope}, {"user id", r.UserID}, {"capability", r.Capability}} {
		if len(f.v) > MaxField || !utf8.ValidString(f.v) {
			return fmt.Errorf("%w: %s is over %d bytes or not UTF-8", ErrInvalid, f.name, MaxField)
		}
	}
	switch {
	case r.Capability == "":
		return fmt.Errorf("%w: no capability", ErrInvalid)
	case r.UserID == "":
		return fmt.Errorf("%w: %s: no user: only an action bound to a user is held", ErrInvalid, r.Capability)
	case r.Risk != registry.RiskReviewRequired && r.Risk != registry.RiskDangerous:
		return fmt.Errorf("%w: %s: risk %q is not one that waits for a human", ErrInvalid, r.Capability, r.Risk)
	case len(r.Args) > MaxArgs:
		return fmt.Errorf("%w: %s: arguments of %d bytes, over %d", ErrInvalid, r.Capability, len(r.Args), MaxArgs)
	case r.TTL < time.Second:
		return fmt.Errorf("%w: %s: a request must wait at least a second, not %v", ErrInvalid, r.Capability, r.TTL)
	}
	return nil
}

// Approval is a stored request and what became of it.
type Approval struct {
	ID                              string
	TokenLabel, Role, Scope, UserID string
	Capability                      string
	Args                            []byte
	ArgsSHA256                      [32]byte
	Risk                            registry.Risk
	// Status is as of the read: a pending request past ExpiresAt reads
	// Expired.
	Status               Status
	CreatedAt, ExpiresAt time.Time
	// DecidedBy names the decider (a token label); Reason is theirs.
	DecidedBy, Reason     string
	DecidedAt             time.Time
	StartedAt, FinishedAt time.Time
	Outcome               Outcome // set when Status is Done
}

// Decision is an approver's answer.
type Decision struct {
	Approve bool
	// By is the decider's token label; ByUser their user id.
	By, ByUser string
	Reason     string
	// AllowSelf lets a user decide their own request (four eyes off).
	AllowSelf bool
}

// Filter selects requests for List; zero fields select all.
type Filter struct {
	UserID string
	Status Status
	// Limit bounds the answer (DefaultLimit when 0, at most MaxLimit).
	Limit int
}

// List bounds.
const (
	DefaultLimit = 50
	MaxLimit     = 500
)

// Store keeps approval requests in SQLite or PostgreSQL. Every decision
// that must happen once — a request approved or rejected, an approved
// request taken to run — is one statement the database settles, so any
// number of stores, in processes and replicas, may share one database.
type Store struct {
	db   *sql.DB
	pool *pgxpool.Pool // under db on PostgreSQL; nil on SQLite
	time func(time.Time) any
	now  func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read the time from now; tests move it.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

func schema(log *slog.Logger) (sqlstore.Schema, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return sqlstore.Schema{}, fmt.Errorf("approvals migrations: %w", err)
	}
	return sqlstore.Schema{Name: "approvals", Migrations: sub, HistoryTable: HistoryTable, Log: log}, nil
}

// Open opens the store dsn selects: empty for SQLite in FileName under
// dataDir, a postgres:// URL for PostgreSQL, which replicas share.
func Open(ctx context.Context, dsn, dataDir string, log *slog.Logger, opts ...Option) (*Store, error) {
	return sqlstore.Open(ctx, sqlstore.Target{Name: "approvals", DSN: dsn, DataDir: dataDir, File: FileName},
		func(ctx context.Context, path string) (*Store, error) { return OpenSQLite(ctx, path, log, opts...) },
		func(ctx context.Context, dsn string) (*Store, error) { return OpenPostgres(ctx, dsn, log, opts...) })
}

// OpenSQLite opens (creating if needed) the SQLite file at path.
func OpenSQLite(ctx context.Context, path string, log *slog.Logger, opts ...Option) (*Store, error) {
	sch, err := schema(log)
	if err != nil {
		return nil, err
	}
	db, err := sqlstore.OpenSQLite(ctx, path, sch)
	if err != nil {
		return nil, err
	}
	return newStore(db, nil, func(t time.Time) any { return sqlstore.FormatTime(t) }, opts), nil
}

// OpenPostgres connects to the database at dsn. Errors never hold the
// password.
func OpenPostgres(ctx context.Context, dsn string, log *slog.Logger, opts ...Option) (*Store, error) {
	sch, err := schema(log)
	if err != nil {
		return nil, err
	}
	pool, err := sqlstore.OpenPostgres(ctx, dsn, sch)
	if err != nil {
		return nil, err
	}
	return newStore(stdlib.OpenDBFromPool(pool), pool, func(t time.Time) any { return sqlstore.PGTime(t) }, opts), nil
}

func newStore(db *sql.DB, pool *pgxpool.Pool, enc func(time.Time) any, opts []Option) *Store {
	s := &Store{db: db, pool: pool, time: enc, now: time.Now}
	for _, o := range opts {
		o(s)
	}
	return s
}

// Close releases the database.
func (s *Store) Close() error {
	err := s.db.Close()
	if s.pool != nil {
		s.pool.Close()
	}
	if err != nil {
		return fmt.Errorf("close approvals database: %w", err)
	}
	return nil
}

// clock is now as both engines keep it: UTC, whole seconds.
func (s *Store) clock() time.Time { return sqlstore.PGTime(s.now()) }

// newID names a request: unguessable, so knowing one's shape does not
// find another's.
func newID() string { return "ap_" + strings.ToLower(rand.Text()) }

// Create stores r as a pending request.
func (s *Store) Create(ctx context.Context, r Request) (Approval, error) {
	if err := r.validate(); err != nil {
		return Approval{}, fmt.Errorf("create approval request: %w", err)
	}
	now := s.clock()
	a := Approval{
		ID: newID(), TokenLabel: r.TokenLabel, Role: r.Role, Scope: r.Scope, UserID: r.UserID,
		Capability: r.Capability, Args: append([]byte(nil), r.Args...), ArgsSHA256: sha256.Sum256(r.Args),
		Risk: r.Risk, Status: Pending, CreatedAt: now, ExpiresAt: now.Add(r.TTL.Truncate(time.Second)),
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO approvals
		(id, token_label, role, scope, user_id, capability, args, args_sha256, risk, status, created_at, expires_at)
		VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, 'pending', $10, $11)`,
		a.ID, a.TokenLabel, a.Role, a.Scope, a.UserID, a.Capability, a.Args, a.ArgsSHA256[:], string(a.Risk),
		s.time(a.CreatedAt), s.time(a.ExpiresAt))
	if err != nil {
		return Approval{}, fmt.Errorf("create approval request for %s: %w", a.Capability, err)
	}
	return a, nil
}

const columns = `id, token_label, role, scope, user_id, capability, args, args_sha256, risk, status,
	created_at, expires_at, decided_by, decided_at, reason, started_at, finished_at, outcome_kind, outcome`

type scanner interface{ Scan(...any) error }

func (s *Store) scan(row scanner) (Approval, error) {
	var (
		a                         Approval
		digest                    []byte
		risk, status              string
		created, expires, decided any
		started, finished         any
		decidedBy, reason, kind   sql.NullString
		outcome                   []byte
	)
	if err := row.Scan(&a.ID, &a.TokenLabel, &a.Role, &a.Scope, &a.UserID, &a.Capability, &a.Args, &digest, &risk, &status,
		&created, &expires, &decidedBy, &decided, &reason, &started, &finished, &kind, &outcome); err != nil {
		return Approval{}, err
	}
	if len(digest) != len(a.ArgsSHA256) {
		return Approval{}, fmt.Errorf("approval %s: stored digest has %d bytes", a.ID, len(digest))
	}
	copy(a.ArgsSHA256[:], digest)
	a.Risk, a.Status, a.DecidedBy, a.Reason = registry.Risk(risk), Status(status), decidedBy.String, reason.String
	for _, t := range []struct {
		col string
		v   any
		to  *time.Time
	}{{"created_at", created, &a.CreatedAt}, {"expires_at", expires, &a.ExpiresAt}, {"decided_at", decided, &a.DecidedAt},
		{"started_at", started, &a.StartedAt}, {"finished_at", finished, &a.FinishedAt}} {
		v, err := decodeTime(t.col, t.v)
		if err != nil {
			return Approval{}, fmt.Errorf("approval %s: %w", a.ID, err)
		}
		*t.to = v
	}
	if a.Status == Done {
		a.Outcome.Kind = OutcomeKind(kind.String)
		if a.Outcome.Kind == OutcomeResult {
			a.Outcome.Result = outcome
		} else {
			a.Outcome.Message = string(outcome)
		}
	}
	if a.Status == Pending && !s.clock().Before(a.ExpiresAt) {
		a.Status = Expired
	}
	return a, nil
}

// decodeTime reads a time column of either engine.
func decodeTime(col string, v any) (time.Time, error) {
	switch v := v.(type) {
	case nil:
		return time.Time{}, nil
	case time.Time:
		return v.UTC(), nil
	case string:
		return sqlstore.ParseTime(col, v)
	case []byte:
		return sqlstore.ParseTime(col, string(v))
	}
	return time.Time{}, fmt.Errorf("stored %s has unexpected type %T", col, v)
}

// Get returns the request id names, or ErrNotFound.
func (s *Store) Get(ctx context.Context, id string) (Approval, error) {
	a, err := s.scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM approvals WHERE id = $1`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return Approval{}, fmt.Errorf("%w: %q", ErrNotFound, clip(id))
	}
	if err != nil {
		return Approval{}, fmt.Errorf("read approval request: %w", err)
	}
	return a, nil
}

// List returns the requests f selects, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Approval, error) {
	if f.Limit < 0 || f.Limit > MaxLimit {
		return nil, fmt.Errorf("%w: limit %d is not between 0 and %d", ErrInvalid, f.Limit, MaxLimit)
	}
	limit := f.Limit
	if limit == 0 {
		limit = DefaultLimit
	}
	var (
		where []string
		args  []any
	)
	if f.UserID != "" {
		args = append(args, f.UserID)
		where = append(where, fmt.Sprintf("user_id = $%d", len(args)))
	}
	now := s.time(s.clock())
	switch f.Status {
	case "":
	case Pending:
		args = append(args, now)
		where = append(where, fmt.Sprintf("status = 'pending' AND expires_at > $%d", len(args)))
	case Expired:
		args = append(args, now)
		where = append(where, fmt.Sprintf("(status = 'expired' OR (status = 'pending' AND expires_at <= $%d))", len(args)))
	case Approved, Rejected, Running, Done:
		args = append(args, string(f.Status))
		where = append(where, fmt.Sprintf("status = $%d", len(args)))
	default:
		return nil, fmt.Errorf("%w: status %q is none of pending, approved, rejected, expired, running, done", ErrInvalid, clip(string(f.Status)))
	}
	q := `SELECT ` + columns + ` FROM approvals`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	args = append(args, limit)
	q += fmt.Sprintf(` ORDER BY created_at DESC, id DESC LIMIT $%d`, len(args))
	rows, err := s.db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("list approval requests: %w", err)
	}
	defer rows.Close()
	var out []Approval
	for rows.Next() {
		a, err := s.scan(rows)
		if err != nil {
			return nil, fmt.Errorf("list approval requests: %w", err)
		}
		out = append(out, a)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list approval requests: %w", err)
	}
	return out, nil
}

// Decide approves or rejects the pending request id. Of deciders racing
// on one request, in any number of replicas, exactly one succeeds; the
// others get ErrDecided. A request past its expiry cannot be decided, nor
// one from the decider's own user unless d.AllowSelf.
func (s *Store) Decide(ctx context.Context, id string, d Decision) (Approval, error) {
	if len(d.Reason) > MaxReason || !utf8.ValidString(d.Reason) || len(d.By) > MaxField || !utf8.ValidString(d.By) {
		return Approval{}, fmt.Errorf("%w: a reason is at most %d bytes of UTF-8", ErrInvalid, MaxReason)
	}
	a, err := s.Get(ctx, id)
	if err != nil {
		return Approval{}, err
	}
	if !d.AllowSelf && d.ByUser != "" && d.ByUser == a.UserID {
		return a, fmt.Errorf("%w: %s asked for by user %q", ErrSelfApproval, a.ID, a.UserID)
	}
	to := Rejected
	if d.Approve {
		to = Approved
	}
	now := s.clock()
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = $2, decided_by = $3, decided_at = $4, reason = $5
		WHERE id = $1 AND status = 'pending' AND expires_at > $4`,
		a.ID, string(to), d.By, s.time(now), nullIfEmpty(d.Reason))
	if err != nil {
		return Approval{}, fmt.Errorf("decide approval request %s: %w", a.ID, err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		if err != nil {
			return Approval{}, fmt.Errorf("decide approval request %s: %w", a.ID, err)
		}
		cur, gerr := s.Get(ctx, id)
		if gerr != nil {
			return Approval{}, gerr
		}
		return cur, fmt.Errorf("%w: %s is %s", ErrDecided, cur.ID, cur.Status)
	}
	return s.Get(ctx, id)
}

// CountByStatus counts the requests by status, as Get reads them: a
// pending request past its expiry counts as expired.
func (s *Store) CountByStatus(ctx context.Context) (map[string]int, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT CASE WHEN status = 'pending' AND expires_at <= $1 THEN 'expired' ELSE status END, count(*)
		FROM approvals GROUP BY 1`, s.time(s.clock()))
	if err != nil {
		return nil, fmt.Errorf("count approval requests: %w", err)
	}
	defer rows.Close()
	out := map[string]int{}
	for rows.Next() {
		var (
			status string
			n      int
		)
		if err := rows.Scan(&status, &n); err != nil {
			return nil, fmt.Errorf("count approval requests: %w", err)
		}
		out[status] += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("count approval requests: %w", err)
	}
	return out, nil
}

// Unannounced lists, oldest decision first, up to limit requests decided
// but not yet announced (Announce).
func (s *Store) Unannounced(ctx context.Context, limit int) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM approvals WHERE announced_at IS NULL AND decided_at IS NOT NULL
		ORDER BY decided_at, id LIMIT $1`, limit)
	if err != nil {
		return nil, fmt.Errorf("list unannounced decisions: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list unannounced decisions: %w", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("list unannounced decisions: %w", err)
	}
	return ids, nil
}

// Announce takes the decision on request id to announce it, and reports
// whether this caller took it: of any number racing, in any replicas, one
// does, so a decision is announced once wherever it was made. The taker
// announces it; one that stops first leaves it unannounced, never twice.
func (s *Store) Announce(ctx context.Context, id string) (Approval, bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET announced_at = $2
		WHERE id = $1 AND announced_at IS NULL AND decided_at IS NOT NULL`, id, s.time(s.clock()))
	if err != nil {
		return Approval{}, false, fmt.Errorf("announce decision on %s: %w", clip(id), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("announce decision on %s: %w", clip(id), err)
	}
	if n != 1 {
		return Approval{}, false, nil
	}
	a, err := s.Get(ctx, id)
	return a, err == nil, err
}

// Start takes the approved request id to run it, and reports whether this
// caller took it: of any number racing, in any replicas, one does. The
// taker runs the call and records what came of it with Finish.
func (s *Store) Start(ctx context.Context, id string) (Approval, bool, error) {
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'running', started_at = $2
		WHERE id = $1 AND status = 'approved'`, id, s.time(s.clock()))
	if err != nil {
		return Approval{}, false, fmt.Errorf("start approved request %s: %w", clip(id), err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return Approval{}, false, fmt.Errorf("start approved request %s: %w", clip(id), err)
	}
	a, err := s.Get(ctx, id)
	return a, n == 1 && err == nil, err
}

// Finish records the outcome of the run Start took.
func (s *Store) Finish(ctx context.Context, id string, o Outcome) (Approval, error) {
	var payload []byte
	switch o.Kind {
	case OutcomeResult:
		payload = o.Result
	case OutcomeToolError, OutcomeRefused, OutcomeFailed:
		payload = []byte(o.Message)
	default:
		return Approval{}, fmt.Errorf("%w: outcome kind %q", ErrInvalid, o.Kind)
	}
	if payload == nil {
		payload = []byte{}
	}
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'done', finished_at = $2, outcome_kind = $3, outcome = $4
		WHERE id = $1 AND status = 'running'`, id, s.time(s.clock()), string(o.Kind), payload)
	if err != nil {
		return Approval{}, fmt.Errorf("finish approved request %s: %w", clip(id), err)
	}
	if n, err := res.RowsAffected(); err != nil || n != 1 {
		return Approval{}, fmt.Errorf("finish approved request %s: %w: it is not running", clip(id), ErrDecided)
	}
	return s.Get(ctx, id)
}

// Swept is what one Sweep changed.
type Swept struct {
	Expired int64 // pending requests past their expiry, now expired
	// Lost are runs older than Lease that never finished: their host
	// stopped mid-call, so whether the call took effect is unknown. They
	// are done with a failed outcome saying so, never run again.
	Lost int64
	// Confirmations are answered in-band confirmations past their expiry,
	// forgotten.
	Confirmations int64
}

// Sweep settles the requests time has decided. Replicas may sweep at
// once: each change is one statement.
func (s *Store) Sweep(ctx context.Context) (Swept, error) {
	now := s.clock()
	var out Swept
	res, err := s.db.ExecContext(ctx, `UPDATE approvals SET status = 'expired' WHERE status = 'pending' AND expires_at <= $1`, s.time(now))
	if err != nil {
		return out, fmt.Errorf("sweep approval requests: %w", err)
	}
	out.Expired, _ = res.RowsAffected()
	res, err = s.db.ExecContext(ctx, `UPDATE approvals SET status = 'done', finished_at = $1, outcome_kind = 'failed', outcome = $2
		WHERE status = 'running' AND started_at <= $3`,
		s.time(now), []byte(LostMessage), s.time(now.Add(-Lease)))
	if err != nil {
		return out, fmt.Errorf("sweep approval requests: %w", err)
	}
	out.Lost, _ = res.RowsAffected()
	// An answered confirmation past its expiry cannot be answered again
	// anyway: its seal says it lapsed.
	res, err = s.db.ExecContext(ctx, `DELETE FROM confirmations_answered WHERE expires_at <= $1`, s.time(now))
	if err != nil {
		return out, fmt.Errorf("sweep answered confirmations: %w", err)
	}
	out.Confirmations, _ = res.RowsAffected()
	return out, nil
}

// Use records the in-band confirmation id as answered until expires
// (confirm.Used): true for the first call to record it, in any process
// sharing the database, false for every later one.
func (s *Store) Use(ctx context.Context, id string, expires time.Time) (bool, error) {
	if id == "" || len(id) > 64 || !utf8.ValidString(id) {
		return false, fmt.Errorf("%w: confirmation id %q", ErrInvalid, id)
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO confirmations_answered (id, expires_at) VALUES ($1, $2) ON CONFLICT (id) DO NOTHING`,
		id, s.time(sqlstore.PGTime(expires)))
	if err != nil {
		return false, fmt.Errorf("record confirmation %s as answered: %w", id, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("record confirmation %s as answered: %w", id, err)
	}
	return n == 1, nil
}

// ConfirmKey returns the key that seals in-band confirmations when the
// configuration names none: made at random by the first store to ask,
// then the same for every store sharing the database, so a state one
// replica seals another opens.
func (s *Store) ConfirmKey(ctx context.Context) ([]byte, error) {
	return s.sharedKey(ctx, "confirm", "confirmation key")
}

// SessionKey returns the key that signs the admin console's session
// cookies, made and shared as ConfirmKey's is but a key of its own, so
// that neither signature can ever stand for the other: a session signed
// on one replica is good on every replica sharing the database.
func (s *Store) SessionKey(ctx context.Context) ([]byte, error) {
	return s.sharedKey(ctx, "console-session", "console session key")
}

// sharedKey returns the random key kept under name, made by the first
// store to ask; the insert that loses a race to make it changes nothing.
func (s *Store) sharedKey(ctx context.Context, name, what string) ([]byte, error) {
	fresh := make([]byte, 32)
	_, _ = rand.Read(fresh) // crypto/rand.Read never fails
	if _, err := s.db.ExecContext(ctx, `INSERT INTO approval_keys (name, key) VALUES ($1, $2) ON CONFLICT (name) DO NOTHING`, name, fresh); err != nil {
		return nil, fmt.Errorf("make the %s: %w", what, err)
	}
	var key []byte
	if err := s.db.QueryRowContext(ctx, `SELECT key FROM approval_keys WHERE name = $1`, name).Scan(&key); err != nil {
		return nil, fmt.Errorf("read the %s: %w", what, err)
	}
	return key, nil
}

// DecisionRecord is the audit record of a decision d on the request id,
// linked to the request's other records by its approval id: capability
// capgate.approval, by the decider, through protocol ("admin", "cli"). A
// decision that err refused is a refusal at step failed, saying why.
func DecisionRecord(protocol string, d Decision, id, capability string, err error) audit.Record {
	verb := "rejected"
	if d.Approve {
		verb = "approved"
	}
	what := verb
	if capability != "" {
		what += " " + capability
	}
	if d.Reason != "" {
		what += ": " + d.Reason
	}
	now := time.Now()
	r := audit.Record{ID: audit.NewID(now), Time: now, Capability: "capgate.approval", TokenLabel: d.By, UserID: d.ByUser,
		Protocol: protocol, Decision: audit.Admitted, Outcome: audit.OutcomeOK, Reason: what, ApprovalID: id}
	if err != nil {
		r.Decision, r.Outcome, r.Step, r.Reason = audit.Refused, "", "failed", "not "+verb+": "+err.Error()
	}
	return r
}

// LostMessage is the outcome of a run its host did not live to finish.
const LostMessage = "the host running this approved call stopped before it recorded the outcome; whether the call took effect is unknown, and it was not run again"

// ApprovedIDs lists the requests approved and not yet taken to run: after
// a restart, those whose host stopped between the decision and the run.
func (s *Store) ApprovedIDs(ctx context.Context) ([]string, error) {
	rows, err := s.db.QueryContext(ctx, `SELECT id FROM approvals WHERE status = 'approved' ORDER BY decided_at, id LIMIT $1`, MaxLimit)
	if err != nil {
		return nil, fmt.Errorf("list approved requests: %w", err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, fmt.Errorf("list approved requests: %w", err)
		}
		ids = append(ids, id)
	}
	return ids, rows.Err()
}

func nullIfEmpty(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// clip bounds caller input quoted in a message.
func clip(s string) string {
	if len(s) <= 64 {
		return s
	}
	n := 64
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "…"
}
