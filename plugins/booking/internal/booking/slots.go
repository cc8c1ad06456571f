package booking

import (
	"fmt"
	"time"

	"github.com/capgate/capgate/plugins/booking/internal/store"
)

// horizon is how far ahead a slot may be booked. It keeps nonsense far
// future dates (year 9999) out of the database and availability bounded.
const horizon = 365 * 24 * time.Hour

const day = 24 * time.Hour

// hhmm renders minutes after midnight as "08:00"; 1440 is "24:00".
func hhmm(min int) string { return fmt.Sprintf("%02d:%02d", min/60, min%60) }

// lastStart is the minute the day's last slot starts.
func lastStart(r store.Resource) int {
	return r.OpensMinute + (r.ClosesMinute-r.OpensMinute)/r.SlotMinutes*r.SlotMinutes - r.SlotMinutes
}

// slotRule describes a resource's slots for a message that must tell the
// caller what a valid start looks like.
func slotRule(r store.Resource) string {
	return fmt.Sprintf("%s has %d-minute slots starting every %d minutes from %s to %s UTC (the last one ends at %s)",
		r.ID, r.SlotMinutes, r.SlotMinutes, hhmm(r.OpensMinute), hhmm(lastStart(r)), hhmm(lastStart(r)+r.SlotMinutes))
}

// isSlot reports whether start (UTC) is the start of one of r's slots.
func isSlot(r store.Resource, start time.Time) bool {
	if start.Second() != 0 || start.Nanosecond() != 0 {
		return false
	}
	m := start.Hour()*60 + start.Minute()
	return m >= r.OpensMinute && m <= lastStart(r) && (m-r.OpensMinute)%r.SlotMinutes == 0
}

// daySlots returns the starts of r's slots on the UTC day beginning at d.
func daySlots(r store.Resource, d time.Time) []time.Time {
	var out []time.Time
	for m := r.OpensMinute; m <= lastStart(r); m += r.SlotMinutes {
		out = append(out, d.Add(time.Duration(m)*time.Minute))
	}
	return out
}

// startOfDay truncates t to midnight UTC.
func startOfDay(t time.Time) time.Time {
	y, m, d := t.UTC().Date()
	return time.Date(y, m, d, 0, 0, 0, 0, time.UTC)
}

func wireTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }
