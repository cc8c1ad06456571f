package sqlstore_test

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/capgate/capgate/sdk/sqlstore"
)

func TestTimeCodec(t *testing.T) {
	at := time.Date(2030, 1, 2, 3, 4, 5, 600, time.FixedZone("X", 3600))
	s := sqlstore.FormatTime(at)
	if s != "2030-01-02T02:04:05Z" {
		t.Errorf("FormatTime = %q, want UTC whole seconds", s)
	}
	back, err := sqlstore.ParseTime("start", s)
	if err != nil || !back.Equal(sqlstore.PGTime(at)) {
		t.Errorf("ParseTime(FormatTime) = %v, %v; want %v, the instant PostgreSQL stores", back, err, sqlstore.PGTime(at))
	}
	if _, err := sqlstore.ParseTime("start", "yesterday"); err == nil || !strings.Contains(err.Error(), `stored start "yesterday"`) {
		t.Errorf("ParseTime of garbage: %v, want an error naming the column and value", err)
	}
}

func TestErrorCodes(t *testing.T) {
	pg := &pgconn.PgError{Code: "23505", ConstraintName: "bookings_pkey"}
	if code, c := sqlstore.PGError(errors.Join(errors.New("insert"), pg)); code != "23505" || c != "bookings_pkey" {
		t.Errorf("PGError of a wrapped unique violation = %q %q", code, c)
	}
	if code, c := sqlstore.PGError(errors.New("plain")); code != "" || c != "" {
		t.Errorf("PGError of a plain error = %q %q, want empty", code, c)
	}
	if code := sqlstore.SQLiteCode(errors.New("plain")); code != 0 {
		t.Errorf("SQLiteCode of a plain error = %d, want 0", code)
	}
}
