package tasks

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

	"github.com/capgate/capgate/sdk/sqlstore"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrationFiles embed.FS

// HistoryTable records the store's applied migrations, apart from the
// other stores' in a shared PostgreSQL schema.
const HistoryTable = "capgate_tasks_migrations"

// FileName is the SQLite file Open keeps in the data directory.
const FileName = "tasks.db"

// Bounds of what a task holds.
const (
	// MaxField bounds a principal's fields and a capability's name.
	MaxField = 255
	// MaxMessage bounds a status message.
	MaxMessage = 1000
	// MaxOutcome bounds a stored outcome: a rendered tool result, which
	// the host already bounds by max_result_bytes (the text block and the
	// structured value may each hold it), or an error object.
	MaxOutcome = 64 << 20
	// MaxTTL is the longest a task may be kept.
	MaxTTL = 30 * 24 * time.Hour
)

// Errors a caller tells apart with errors.Is.
var (
	ErrInvalid = errors.New("invalid task")
	// ErrNotFound: no such task, or not the asker's, or past its TTL: the
	// three read alike, so a task ID learns nothing of another's tasks.
	ErrNotFound = errors.New("no such task")
	// ErrTooMany: the principal has as many unfinished tasks as allowed.
	ErrTooMany = errors.New("too many unfinished tasks")
)

// Status is where a task is in its life, named as the extension names it.
type Status string

const (
	Working       Status = "working"
	InputRequired Status = "input_required"
	Completed     Status = "completed" // Outcome is the call's result (a tool error included)
	Failed        Status = "failed"    // Outcome is the error that ended it
	Cancelled     Status = "cancelled"
)

// Terminal reports whether s is an end: completed, failed or cancelled.
func (s Status) Terminal() bool { return s == Completed || s == Failed || s == Cancelled }

// Owner is the principal a task belongs to: the token it was started with
// (its label) and the user it acts for. Only the same owner sees it.
type Owner struct {
	TokenLabel, UserID string
}

// New is a task to create.
type New struct {
	Owner      Owner
	Capability string
	// ArgsSHA256 is the digest of the call's arguments: enough to tell
	// two tasks' calls apart in an investigation, without keeping them.
	ArgsSHA256 [32]byte
	// Message is the initial status message; empty for none.
	Message string
	// ApprovalID names the approval request of a call held for a human;
	// empty for a call that runs at once.
	ApprovalID string
	// TTL is how long the task is kept from its creation.
	TTL time.Duration
}

func checkField(name, v string) error {
	if len(v) > MaxField || !utf8.ValidString(v) {
		return fmt.Errorf("%w: %s is over %d bytes or not UTF-8", ErrInvalid, name, MaxField)
	}
	return nil
}

func checkMessage(m string) error {
	if len(m) > MaxMessage || !utf8.ValidString(m) {
		return fmt.Errorf("%w: a status message is at most %d bytes of UTF-8", ErrInvalid, MaxMessage)
	}
	return nil
}

func (n New) validate() error {
	for _, f := range []struct{ name, v string }{{"token label", n.Owner.TokenLabel}, {"user id", n.Owner.UserID}, {"capability", n.Capability}, {"approval id", n.ApprovalID}} {
		if err := checkField(f.name, f.v); err != nil {
			return err
		}
	}
	switch {
	case n.Capability == "":
		return fmt.Errorf("%w: no capability", ErrInvalid)
	case n.TTL < time.Second || n.TTL > MaxTTL:
		return fmt.Errorf("%w: %s: a TTL of %v is not between a second and %v", ErrInvalid, n.Capability, n.TTL, MaxTTL)
	}
	return checkMessage(n.Message)
}

// Task is a stored task.
type Task struct {
	ID         string
	Owner      Owner
	Capability string
	ArgsSHA256 [32]byte
	Status     Status
	Message    string
	// ApprovalID names the approval request the task follows, if any.
	ApprovalID string
	// Outcome is the call's result (Completed) or the error that ended it
	// (Failed), as the adapter that ran it encoded them; nil otherwise.
	Outcome []byte
	// Round counts the times the task waited on its client.
	Round int
	// Pending are the requests an input_required task waits on that its
	// client has not answered yet, in the order asked; nil otherwise.
	Pending                         []Request
	CreatedAt, UpdatedAt, ExpiresAt time.Time
}

// TTL is how long the task is kept from its creation.
func (t Task) TTL() time.Duration { return t.ExpiresAt.Sub(t.CreatedAt) }

// Store keeps tasks in SQLite or PostgreSQL. Every change of status is one
// statement that only moves an unfinished task, so a task ends once
// however many replicas race to end it (a run finishing, a cancel).
type Store struct {
	db   *sql.DB
	pool *pgxpool.Pool // under db on PostgreSQL; nil on SQLite
	now  func() time.Time
}

// Option configures a Store.
type Option func(*Store)

// WithClock makes the store read the time from now; tests move it.
func WithClock(now func() time.Time) Option { return func(s *Store) { s.now = now } }

func schema(log *slog.Logger) (sqlstore.Schema, error) {
	sub, err := fs.Sub(migrationFiles, "migrations")
	if err != nil {
		return sqlstore.Schema{}, fmt.Errorf("tasks migrations: %w", err)
	}
	return sqlstore.Schema{Name: "tasks", Migrations: sub, HistoryTable: HistoryTable, Log: log}, nil
}

// Open opens the store dsn selects: empty for SQLite in FileName under
// dataDir, a postgres:// URL for PostgreSQL, which replicas share.
func Open(ctx context.Context, dsn, dataDir string, log *slog.Logger, opts ...Option) (*Store, error) {
	return sqlstore.Open(ctx, sqlstore.Target{Name: "tasks", DSN: dsn, DataDir: dataDir, File: FileName},
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
	return newStore(db, nil, opts), nil
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
	return newStore(stdlib.OpenDBFromPool(pool), pool, opts), nil
}

func newStore(db *sql.DB, pool *pgxpool.Pool, opts []Option) *Store {
	s := &Store{db: db, pool: pool, now: time.Now}
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
		return fmt.Errorf("close tasks database: %w", err)
	}
	return nil
}

// clock is now in the stored unit, Unix milliseconds.
func (s *Store) clock() int64 { return s.now().UnixMilli() }

func fromMS(ms int64) time.Time { return time.UnixMilli(ms).UTC() }

// newID names a task: 130 random bits, so a task ID works as the bearer
// of nothing — knowing one's shape does not find another's.
func newID() string { return "tk_" + strings.ToLower(rand.Text()) }

// unfinished is the SQL condition of a task that may still change.
const unfinished = `status IN ('working', 'input_required')`

// Create stores a working task for n, unless n.Owner already has
// maxActive unfinished tasks (ErrTooMany; 0 means no bound). The check
// and the insert are one statement; creations racing on several replicas
// may each see the count below the bound, so it holds per statement, not
// across a race.
func (s *Store) Create(ctx context.Context, n New, maxActive int) (Task, error) {
	if err := n.validate(); err != nil {
		return Task{}, fmt.Errorf("create task: %w", err)
	}
	if maxActive < 0 {
		return Task{}, fmt.Errorf("create task: %w: a bound of %d unfinished tasks", ErrInvalid, maxActive)
	}
	now := s.clock()
	t := Task{
		ID: newID(), Owner: n.Owner, Capability: n.Capability, ArgsSHA256: n.ArgsSHA256, Status: Working, ApprovalID: n.ApprovalID,
		Message: n.Message, CreatedAt: fromMS(now), UpdatedAt: fromMS(now), ExpiresAt: fromMS(now + n.TTL.Milliseconds()),
	}
	bound := int64(maxActive)
	if maxActive == 0 {
		bound = 1 << 62
	}
	// An INSERT from a SELECT gives PostgreSQL no column to infer the
	// parameters' types from, so they are cast there; SQLite takes them
	// as they come.
	cast := func(p, typ string) string {
		if s.pool != nil {
			return p + "::" + typ
		}
		return p
	}
	res, err := s.db.ExecContext(ctx, `INSERT INTO tasks
		(id, token_label, user_id, capability, args_sha256, status, status_message, created_ms, updated_ms, expires_ms, approval_id)
		SELECT `+cast("$1", "text")+`, `+cast("$2", "text")+`, `+cast("$3", "text")+`, `+cast("$4", "text")+`, `+cast("$5", "bytea")+`,
			'working', `+cast("$6", "text")+`, `+cast("$7", "bigint")+`, `+cast("$7", "bigint")+`, `+cast("$8", "bigint")+`, `+cast("$10", "text")+`
		WHERE (SELECT count(*) FROM tasks WHERE token_label = `+cast("$2", "text")+` AND user_id = `+cast("$3", "text")+`
			AND `+unfinished+` AND expires_ms > `+cast("$7", "bigint")+`) < `+cast("$9", "bigint"),
		t.ID, t.Owner.TokenLabel, t.Owner.UserID, t.Capability, t.ArgsSHA256[:], t.Message, now, now+n.TTL.Milliseconds(), bound, t.ApprovalID)
	if err != nil {
		return Task{}, fmt.Errorf("create task for %s: %w", t.Capability, err)
	}
	if k, err := res.RowsAffected(); err != nil {
		return Task{}, fmt.Errorf("create task for %s: %w", t.Capability, err)
	} else if k == 0 {
		return Task{}, fmt.Errorf("create task for %s: %w: at most %d at once", t.Capability, ErrTooMany, maxActive)
	}
	return t, nil
}

const columns = `id, token_label, user_id, capability, args_sha256, status, status_message, outcome, created_ms, updated_ms, expires_ms, approval_id,
	input_round, input_requests, input_answers`

type scanner interface{ Scan(...any) error }

func scan(row scanner) (Task, error) {
	var (
		t                         Task
		digest                    []byte
		status                    string
		created, updated, expires int64
		requests, answers         []byte
	)
	if err := row.Scan(&t.ID, &t.Owner.TokenLabel, &t.Owner.UserID, &t.Capability, &digest, &status, &t.Message, &t.Outcome,
		&created, &updated, &expires, &t.ApprovalID, &t.Round, &requests, &answers); err != nil {
		return Task{}, err
	}
	if requests != nil {
		w, err := decodeWaiting(requests, answers)
		if err != nil {
			return Task{}, fmt.Errorf("task %s: %w", t.ID, err)
		}
		t.Pending = w.pending()
	}
	if len(digest) != len(t.ArgsSHA256) {
		return Task{}, fmt.Errorf("task %s: stored digest has %d bytes", t.ID, len(digest))
	}
	copy(t.ArgsSHA256[:], digest)
	t.Status = Status(status)
	t.CreatedAt, t.UpdatedAt, t.ExpiresAt = fromMS(created), fromMS(updated), fromMS(expires)
	return t, nil
}

// clip bounds an ID quoted in an error: IDs come from callers.
func clip(id string) string {
	if len(id) > 64 {
		id = id[:64]
	}
	return strings.ToValidUTF8(id, "?")
}

// Get returns the task id names if it belongs to o and is within its TTL;
// otherwise ErrNotFound, the same for each of those.
func (s *Store) Get(ctx context.Context, o Owner, id string) (Task, error) {
	t, err := scan(s.db.QueryRowContext(ctx, `SELECT `+columns+` FROM tasks
		WHERE id = $1 AND token_label = $2 AND user_id = $3 AND expires_ms > $4`, id, o.TokenLabel, o.UserID, s.clock()))
	if errors.Is(err, sql.ErrNoRows) {
		return Task{}, fmt.Errorf("%w: %q", ErrNotFound, clip(id))
	}
	if err != nil {
		return Task{}, fmt.Errorf("read task: %w", err)
	}
	return t, nil
}

// Status is the status of the task id names, whoever owns it: what the
// replica running it reads to learn it was cancelled elsewhere.
func (s *Store) Status(ctx context.Context, id string) (Status, error) {
	var st string
	err := s.db.QueryRowContext(ctx, `SELECT status FROM tasks WHERE id = $1`, id).Scan(&st)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("%w: %q", ErrNotFound, clip(id))
	}
	if err != nil {
		return "", fmt.Errorf("read task status: %w", err)
	}
	return Status(st), nil
}

// Outcome is how a run ends a task.
type Outcome struct {
	// Status is Completed, Failed or Cancelled.
	Status Status
	// Payload is the result (Completed) or the error (Failed); nil for
	// Cancelled.
	Payload []byte
	Message string
}

func (o Outcome) validate() error {
	switch o.Status {
	case Completed, Failed:
		if len(o.Payload) == 0 {
			return fmt.Errorf("%w: a %s task needs its outcome", ErrInvalid, o.Status)
		}
	case Cancelled:
		if o.Payload != nil {
			return fmt.Errorf("%w: a cancelled task keeps no outcome", ErrInvalid)
		}
	default:
		return fmt.Errorf("%w: %q is not an end", ErrInvalid, clip(string(o.Status)))
	}
	if len(o.Payload) > MaxOutcome {
		return fmt.Errorf("%w: an outcome of %d bytes, over %d", ErrInvalid, len(o.Payload), MaxOutcome)
	}
	return checkMessage(o.Message)
}

// Finish ends the task id names with o, if it has not ended: it reports
// whether this call ended it. A task already ended (cancelled while it
// ran, or swept as lost) keeps its first end, and o is dropped.
func (s *Store) Finish(ctx context.Context, id string, o Outcome) (bool, error) {
	if err := o.validate(); err != nil {
		return false, fmt.Errorf("finish task: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = $2, outcome = $3, status_message = $4, updated_ms = $5, `+noInput+`
		WHERE id = $1 AND `+unfinished, id, string(o.Status), o.Payload, o.Message, s.clock())
	if err != nil {
		return false, fmt.Errorf("finish task: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("finish task: %w", err)
	}
	return k == 1, nil
}

// Progress sets the status message of a working task (a held call's,
// once approved); it reports whether the task was working. A task waits
// on its client only through Park.
func (s *Store) Progress(ctx context.Context, id string, st Status, msg string) (bool, error) {
	if st != Working {
		return false, fmt.Errorf("task progress: %w: %q is not working", ErrInvalid, clip(string(st)))
	}
	if err := checkMessage(msg); err != nil {
		return false, fmt.Errorf("task progress: %w", err)
	}
	res, err := s.db.ExecContext(ctx, `UPDATE tasks SET status_message = $2, updated_ms = $3
		WHERE id = $1 AND status = 'working'`, id, msg, s.clock())
	if err != nil {
		return false, fmt.Errorf("task progress: %w", err)
	}
	k, err := res.RowsAffected()
	if err != nil {
		return false, fmt.Errorf("task progress: %w", err)
	}
	return k == 1, nil
}

// Cancel marks o's task id cancelled if it has not ended, and returns the
// task as it now stands: an ended task is left as it is, so cancelling
// twice, or after the end, is no error. ErrNotFound as for Get.
func (s *Store) Cancel(ctx context.Context, o Owner, id string, msg string) (Task, error) {
	if err := checkMessage(msg); err != nil {
		return Task{}, fmt.Errorf("cancel task: %w", err)
	}
	now := s.clock()
	if _, err := s.db.ExecContext(ctx, `UPDATE tasks SET status = 'cancelled', status_message = $4, updated_ms = $5, `+noInput+`
		WHERE id = $1 AND token_label = $2 AND user_id = $3 AND `+unfinished+` AND expires_ms > $5`,
		id, o.TokenLabel, o.UserID, msg, now); err != nil {
		return Task{}, fmt.Errorf("cancel task: %w", err)
	}
	return s.Get(ctx, o, id)
}

// Sweep deletes the tasks past their TTL, and ends as failed, with
// lostOutcome, every working task whose run began before lostBefore (its
// creation, or the answer that resumed it) and that runs no held call:
// its run cannot still be under way (the host bounds each run), so the
// replica that ran it went away first. A held call's task waits for a
// human, and its approval request says how it ended; a task waiting on
// its client runs nothing, and waits until its TTL. It returns how many
// it deleted and ended.
func (s *Store) Sweep(ctx context.Context, lostBefore time.Time, lostOutcome []byte) (deleted, lost int64, err error) {
	if err := (Outcome{Status: Failed, Payload: lostOutcome}).validate(); err != nil {
		return 0, 0, fmt.Errorf("sweep tasks: %w", err)
	}
	now := s.clock()
	res, err := s.db.ExecContext(ctx, `DELETE FROM tasks WHERE expires_ms <= $1`, now)
	if err != nil {
		return 0, 0, fmt.Errorf("sweep tasks: %w", err)
	}
	if deleted, err = res.RowsAffected(); err != nil {
		return 0, 0, fmt.Errorf("sweep tasks: %w", err)
	}
	res, err = s.db.ExecContext(ctx, `UPDATE tasks SET status = 'failed', outcome = $1, status_message = $2, updated_ms = $3
		WHERE status = 'working' AND approval_id = '' AND updated_ms < $4`, lostOutcome, "the run was lost with the server that ran it", now, lostBefore.UnixMilli())
	if err != nil {
		return deleted, 0, fmt.Errorf("sweep tasks: %w", err)
	}
	if lost, err = res.RowsAffected(); err != nil {
		return deleted, 0, fmt.Errorf("sweep tasks: %w", err)
	}
	return deleted, lost, nil
}
