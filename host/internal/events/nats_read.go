package events

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

func decodeEvent(seq uint64, data []byte) (Event, error) {
	var ev Event
	if err := json.Unmarshal(data, &ev); err != nil {
		return Event{}, fmt.Errorf("events: decode event %d: %w", seq, err)
	}
	ev.Cursor = seq
	return ev, nil
}

// State implements [Bus]. The ID is the stream's name and creation time, so
// a stream deleted and created again is a different bus.
func (b *NATS) State(ctx context.Context) (State, error) {
	if b.isClosed() {
		return State{}, fmt.Errorf("events: state: %w", ErrClosed)
	}
	info, err := b.stream.Info(ctx)
	if err != nil {
		return State{}, fmt.Errorf("events: state: stream %s info: %w", b.cfg.Stream, err)
	}
	st := State{
		ID:   fmt.Sprintf("nats:%s@%d", b.cfg.Stream, info.Created.UnixNano()),
		Last: info.State.LastSeq,
	}
	if info.State.Msgs > 0 {
		st.Oldest = info.State.FirstSeq
	}
	return st, nil
}

// Since implements [Bus] with direct gets from the stream.
func (b *NATS) Since(ctx context.Context, after uint64, limit int) ([]Event, uint64, error) {
	if err := validateLimit(limit); err != nil {
		return nil, 0, err
	}
	if b.isClosed() {
		return nil, 0, fmt.Errorf("events: since %d: %w", after, ErrClosed)
	}
	info, err := b.stream.Info(ctx)
	if err != nil {
		return nil, 0, fmt.Errorf("events: since %d: stream %s info: %w", after, b.cfg.Stream, err)
	}
	var oldest uint64
	if info.State.Msgs > 0 {
		oldest = info.State.FirstSeq
	}
	if oldest > 0 && after+1 < oldest {
		return nil, oldest, &CursorTooOldError{After: after, Oldest: oldest}
	}
	var out []Event
	for seq := after + 1; seq <= info.State.LastSeq && len(out) < limit; seq++ {
		msg, err := b.stream.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			// Discarded since Info: the window moved past after.
			if len(out) == 0 {
				return b.Since(ctx, after, limit)
			}
			break
		}
		if err != nil {
			return nil, oldest, fmt.Errorf("events: since %d: get %d from stream %s: %w", after, seq, b.cfg.Stream, err)
		}
		ev, err := decodeEvent(msg.Sequence, msg.Data)
		if err != nil {
			return nil, oldest, err
		}
		out = append(out, ev)
	}
	return out, oldest, nil
}
