package approvals

import (
	"context"
	"crypto/rand"
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
	// ErrUnboundDecider: the decider is bound to no user, so four eyes
	// cannot tell them from the asker.
	ErrUnboundDecider = errors.New("only a decider bound to a user may decide a request")
	// ErrTooManyPending: the asker has as many pending requests as
	// Request.MaxPending allows.
	ErrTooManyPending = errors.New("too many requests pending approval")
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

// Approval is a stored request and what became of it.
type Approval struct {
	ID                              string
	TokenLabel, Role, Scope, UserID string
	Capability                      string
	// Args are the arguments exactly as sent, kept only while the call
	// may still run (pending, approved, running) and nil after: the run
	// needs them, and nothing else may show them, as they hold what the
	// capability marks sensitive. Shown is what every view shows.
	Args       []byte
	ArgsSHA256 [32]byte
	// Shown are the arguments with every sensitive value redacted
	// (audit.Redact), kept for as long as the request; Withheld for a
	// request stored before they were kept.
	Shown []byte
	Risk  registry.Risk
	// Status is as of the read: a pending request past ExpiresAt reads
	// Expired.
	Status               Status
	CreatedAt, ExpiresAt time.Time
	// DecidedBy names the decider (a token label); Reason is theirs.
	DecidedBy, Reason     string
	DecidedAt             time.Time
	StartedAt, FinishedAt time.Time
	Outcome               Outcome // set when Status is Done
	// Joined is set by Create when the call joined an identical pending
	// request (same token, user, capability and canonical arguments)
	// rather than being stored anew.
	Joined bool
}

// Withheld is what Shown holds for a request stored before the redacted
// copy was kept: its arguments are shown to no one.
const Withheld = `{"$approvals":"withheld"}`

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

const columns = `id, token_label, role, scope, user_id, capability, args, args_sha256, args_shown, risk, status,
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
	if err := row.Scan(&a.ID, &a.TokenLabel, &a.Role, &a.Scope, &a.UserID, &a.Capability, &a.Args, &digest, &a.Shown, &risk, &status,
		&created, &expires, &decidedBy, &decided, &reason, &started, &finished, &kind, &outcome); err != nil {
		return Approval{}, err
	}
	if len(digest) != len(a.ArgsSHA256) {
		return Approval{}, fmt.Errorf("approval %s: stored digest has %d bytes", a.ID, len(digest))
	}
	copy(a.ArgsSHA256[:], digest)
	if a.Shown == nil {
		a.Shown = []byte(Withheld)
	}
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
