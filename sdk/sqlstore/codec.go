package sqlstore

import (
	"errors"
	"fmt"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
)

// TimeLayout is how stores keep instants in SQLite text columns: UTC, whole
// seconds, so the text sorts as the time does.
const TimeLayout = "2006-01-02T15:04:05Z"

// FormatTime is t as a SQLite text column holds it (TimeLayout).
func FormatTime(t time.Time) string { return t.UTC().Format(TimeLayout) }

// ParseTime reads a TimeLayout column; col names it in the error.
func ParseTime(col, s string) (time.Time, error) {
	t, err := time.Parse(TimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored %s %q is not a valid time: %w", col, s, err)
	}
	return t, nil
}

// PGTime is the instant a PostgreSQL timestamptz column stores for t: UTC,
// whole seconds, so both engines give back the same times.
func PGTime(t time.Time) time.Time { return t.UTC().Truncate(time.Second) }

// SQLiteCode is the extended result code of a SQLite error, 0 for any
// other error.
func SQLiteCode(err error) int {
	var se *sqlite.Error
	if errors.As(err, &se) {
		return se.Code()
	}
	return 0
}

// PGError is the SQLSTATE and constraint name of a PostgreSQL error, empty
// for any other error.
func PGError(err error) (code, constraint string) {
	var pe *pgconn.PgError
	if errors.As(err, &pe) {
		return pe.Code, pe.ConstraintName
	}
	return "", ""
}
