package search

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/capgate/capgate/plugins/search/internal/index"
	"github.com/capgate/capgate/sdk"
)

// Catalogue event types the index follows.
const (
	EventUpsert = "catalogue.upsert"
	EventDelete = "catalogue.delete"
)

// Metadata keys kept in the index (see index.Meta).
const (
	metaBusID    = "bus_id"   // the bus the cursor belongs to
	metaCursor   = "cursor"   // the last event applied (or skipped)
	metaEntities = "entities" // entity types that may have a stored version, one a line
)

// Subscription retry backoff.
const (
	minBackoff = time.Second
	maxBackoff = 30 * time.Second
)

// skippedFlush is how many skipped events (of entity types outside the
// catalogue) advance the cursor in memory before it is persisted.
const skippedFlush = 100

// catalogue is the host's catalogue, as it was when the plugin started:
// the host's registries do not change while it runs.
type catalogue struct {
	list   []sdk.EntityInfo
	byName map[string]sdk.EntityInfo
	names  []string
}

func newCatalogue(es []sdk.EntityInfo) *catalogue {
	c := &catalogue{list: es, byName: make(map[string]sdk.EntityInfo, len(es))}
	for _, e := range es {
		c.byName[e.Name] = e
		c.names = append(c.names, e.Name)
	}
	slices.Sort(c.names)
	return c
}

// service is the plugin's state: the index, the catalogue, and the
// goroutine that keeps the index current.
type service struct {
	env          sdk.Env
	log          *slog.Logger
	dir          string
	queryTimeout time.Duration // how long one search may run

	// mu guards idx: capabilities and the sync goroutine use it under the
	// read lock; swapping it (a rebuild) and closing it take the write lock.
	mu     sync.RWMutex
	idx    *index.Index
	closed bool

	cat atomic.Pointer[catalogue] // set by start

	cancel context.CancelFunc // stops the sync goroutine
	done   chan struct{}      // closed when it has stopped

	// Owned by start, then by the sync goroutine.
	busID   string
	cursor  uint64
	unsaved int // skipped events since the cursor was last persisted
}

func (s *service) configure(env sdk.Env, idx *index.Index, queryTimeout time.Duration) {
	s.env, s.log, s.idx, s.dir, s.queryTimeout = env, env.Logger, idx, idx.Dir(), queryTimeout
}

var errNotReady = errors.New("the search index is not ready: the host has not started the search plugin")

func (s *service) catalogue() (*catalogue, error) {
	c := s.cat.Load()
	if c == nil {
		return nil, errNotReady
	}
	return c, nil
}

// acquire returns the catalogue and the index, held open until release.
func (s *service) acquire() (*catalogue, *index.Index, func(), error) {
	c, err := s.catalogue()
	if err != nil {
		return nil, nil, nil, err
	}
	s.mu.RLock()
	if s.closed || s.idx == nil {
		s.mu.RUnlock()
		return nil, nil, nil, errors.New("the search index is closed")
	}
	return c, s.idx, s.mu.RUnlock, nil
}

func (s *service) index() *index.Index {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.idx
}

// start brings the index up to date with the providers, then follows the
// bus in a goroutine.
func (s *service) start(ctx context.Context, env sdk.Env, st sdk.Start) error {
	// env is the one configure kept, and s.env stays as it is: capabilities
	// read it concurrently.
	began := time.Now()
	if st.Rebuild {
		if err := s.reset(); err != nil {
			return err
		}
	}
	// The bus's position before syncing: events published while the sync
	// runs are applied afterwards (again, harmlessly) rather than missed.
	bus, err := env.Bus(ctx)
	if err != nil {
		return err
	}
	cats, err := env.Catalogue(ctx)
	if err != nil {
		return err
	}
	cat := newCatalogue(cats)
	s.cat.Store(cat)

	idx := s.index()
	busID, err := idx.Meta(metaBusID)
	if err != nil {
		return err
	}
	cursor, err := s.storedCursor(idx)
	if err != nil {
		return err
	}
	resume := busID != "" && busID == bus.ID && cursor <= bus.Last && (bus.Oldest == 0 || cursor+1 >= bus.Oldest)
	synced, err := s.syncAll(ctx, idx, cat, !resume)
	if err != nil {
		return err
	}
	if !resume {
		busID, cursor = bus.ID, bus.Last
		if err := idx.Apply(ctx, index.Change{Meta: map[string]string{
			metaBusID: busID, metaCursor: strconv.FormatUint(cursor, 10),
		}}); err != nil {
			return fmt.Errorf("save sync state: %w", err)
		}
	}
	s.busID, s.cursor = busID, cursor
	n, err := idx.Count()
	if err != nil {
		return err
	}
	if synced == nil {
		synced = []string{}
	}
	s.log.Info("search index ready", "documents", n, "entities", synced, "resumed", resume,
		"cursor", cursor, "duration", time.Since(began).Round(time.Millisecond).String())

	sctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	s.mu.Lock()
	s.cancel, s.done = cancel, done
	s.mu.Unlock()
	go s.follow(sctx, done)
	return nil
}

func (s *service) storedCursor(idx *index.Index) (uint64, error) {
	v, err := idx.Meta(metaCursor)
	if err != nil || v == "" {
		return 0, err
	}
	c, err := strconv.ParseUint(v, 10, 64)
	if err != nil {
		// A cursor that cannot be read means nothing: start over.
		s.log.Warn("search index has an unreadable cursor; resyncing", "cursor", v)
		return 0, nil
	}
	return c, nil
}

// reset discards the index entirely (documents, versions, cursor) and
// opens an empty one in its place.
func (s *service) reset() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return errors.New("the search index is closed")
	}
	if err := s.idx.Close(); err != nil {
		return err
	}
	s.idx = nil
	if err := index.Remove(s.dir); err != nil {
		return err
	}
	idx, err := index.Open(s.dir)
	if err != nil {
		return err
	}
	s.idx = idx
	s.log.Info("search index emptied for a rebuild", "dir", s.dir)
	return nil
}

func versionTag(v string) string { return "v:" + v } // "" stays a version

// syncAll fully syncs every catalogue entity type whose stored version
// differs from the catalogue's (every one when force is set) and removes
// the types the catalogue no longer holds. It returns the synced types.
func (s *service) syncAll(ctx context.Context, idx *index.Index, cat *catalogue, force bool) ([]string, error) {
	stored, err := idx.Meta(metaEntities)
	if err != nil {
		return nil, err
	}
	known := strings.Fields(stored)
	// Record every type that may get a version before any does, so a
	// crash midway leaves none unaccounted for.
	all := slices.Compact(slices.Sorted(slices.Values(append(slices.Clone(known), cat.names...))))
	if err := idx.SetMeta(metaEntities, strings.Join(all, "\n")); err != nil {
		return nil, err
	}
	var synced []string
	for _, e := range cat.list {
		v, err := idx.Version(e.Name)
		if err != nil {
			return nil, err
		}
		if !force && v == versionTag(e.Version) {
			continue
		}
		if err := s.syncEntity(ctx, idx, e); err != nil {
			return nil, err
		}
		synced = append(synced, e.Name)
	}
	present, err := idx.Entities(ctx)
	if err != nil {
		return nil, err
	}
	for _, name := range slices.Compact(slices.Sorted(slices.Values(append(present, all...)))) {
		if _, ok := cat.byName[name]; ok {
			continue
		}
		if err := idx.SetVersion(name, ""); err != nil {
			return nil, err
		}
		if err := idx.DeleteEntity(ctx, name); err != nil {
			return nil, err
		}
		s.log.Info("search index dropped an entity type no plugin provides any more", "entity", name)
	}
	if err := idx.SetMeta(metaEntities, strings.Join(cat.names, "\n")); err != nil {
		return nil, err
	}
	return synced, nil
}

// syncEntity replaces the index's documents of e with the provider's. Its
// version is cleared first and set last, so a sync cut short is redone on
// the next start.
func (s *service) syncEntity(ctx context.Context, idx *index.Index, e sdk.EntityInfo) error {
	if err := idx.SetVersion(e.Name, ""); err != nil {
		return err
	}
	if err := idx.DeleteEntity(ctx, e.Name); err != nil {
		return err
	}
	after := ""
	for {
		docs, more, err := s.env.Documents(ctx, e.Name, after, 0)
		if err != nil {
			return fmt.Errorf("sync %s: %w", e.Name, err)
		}
		if err := idx.Upsert(ctx, s.toIndex(e.Name, docs)...); err != nil {
			return fmt.Errorf("sync %s: %w", e.Name, err)
		}
		if !more || len(docs) == 0 {
			break
		}
		after = docs[len(docs)-1].ID
	}
	return idx.SetVersion(e.Name, versionTag(e.Version))
}

// toIndex converts a provider's documents, leaving out (and logging) any
// without an id.
func (s *service) toIndex(entity string, docs []sdk.Document) []index.Document {
	out := make([]index.Document, 0, len(docs))
	for _, d := range docs {
		if strings.TrimSpace(d.ID) == "" {
			s.log.Warn("search index skipped a document without id", "entity", entity, "title", d.Title)
			continue
		}
		out = append(out, index.Document{Entity: entity, ID: d.ID, Title: d.Title, Body: d.Body, Fields: d.Fields})
	}
	return out
}

// follow applies the bus's catalogue events from s.cursor on, until ctx
// ends. A subscription that missed events resyncs everything; any other
// failure is retried with backoff.
func (s *service) follow(ctx context.Context, done chan<- struct{}) {
	defer close(done)
	defer s.flushCursor()
	backoff := minBackoff
	for {
		progressed := false
		err := s.env.Subscribe(ctx, s.cursor, []string{EventUpsert, EventDelete}, func(ctx context.Context, ev sdk.ReceivedEvent) error {
			if err := s.apply(ctx, ev); err != nil {
				return err
			}
			progressed = true
			return nil
		})
		if ctx.Err() != nil {
			return
		}
		if progressed {
			backoff = minBackoff
		}
		if errors.Is(err, sdk.ErrEventsLost) {
			s.log.Warn("search index missed catalogue events; resyncing every entity type", "cursor", s.cursor, "err", err)
			if err = s.resync(ctx); err == nil {
				backoff = minBackoff
				continue
			}
			if ctx.Err() != nil {
				return
			}
			s.log.Error("search index resync failed; retrying", "err", err, "retry_in", backoff.String())
		} else {
			s.log.Error("search index subscription failed; retrying", "err", err, "cursor", s.cursor, "retry_in", backoff.String())
		}
		t := time.NewTimer(backoff)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
		backoff = min(backoff*2, maxBackoff)
	}
}

// resync rebuilds every entity type from its provider and moves the cursor
// to the bus's last event as it was before the resync began.
func (s *service) resync(ctx context.Context) error {
	began := time.Now()
	bus, err := s.env.Bus(ctx)
	if err != nil {
		return err
	}
	cat, err := s.catalogue()
	if err != nil {
		return err
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return errors.New("the search index is closed")
	}
	synced, err := s.syncAll(ctx, s.idx, cat, true)
	if err != nil {
		return err
	}
	if err := s.idx.Apply(ctx, index.Change{Meta: map[string]string{
		metaBusID: bus.ID, metaCursor: strconv.FormatUint(bus.Last, 10),
	}}); err != nil {
		return fmt.Errorf("save sync state: %w", err)
	}
	s.busID, s.cursor, s.unsaved = bus.ID, bus.Last, 0
	s.log.Info("search index resynced", "entities", synced, "cursor", bus.Last,
		"duration", time.Since(began).Round(time.Millisecond).String())
	return nil
}

// apply applies one event: the document change and the new cursor commit
// in one batch, so an event is never applied twice nor lost across a crash.
func (s *service) apply(ctx context.Context, ev sdk.ReceivedEvent) error {
	if ev.Cursor <= s.cursor {
		return nil // applied before
	}
	cat, err := s.catalogue()
	if err != nil {
		return err
	}
	_, known := cat.byName[ev.Entity]
	if !known || strings.TrimSpace(ev.ID) == "" || (ev.Type != EventUpsert && ev.Type != EventDelete) {
		// Nothing to index; the cursor still moves on, persisted lazily.
		s.cursor = ev.Cursor
		s.unsaved++
		if s.unsaved >= skippedFlush {
			s.flushCursor()
		}
		return nil
	}
	ch := index.Change{Meta: map[string]string{metaCursor: strconv.FormatUint(ev.Cursor, 10)}}
	del := []index.Ref{{Entity: ev.Entity, ID: ev.ID}}
	if ev.Type == EventUpsert {
		docs, err := s.env.DocumentsByID(ctx, ev.Entity, []string{ev.ID})
		if err != nil {
			return fmt.Errorf("apply event %d: %w", ev.Cursor, err)
		}
		var found []sdk.Document
		for _, d := range docs {
			if d.ID == ev.ID {
				found = append(found, d)
				break
			}
		}
		if len(found) > 0 {
			ch.Upsert = s.toIndex(ev.Entity, found)
		} else {
			ch.Delete = del // gone again since the event
		}
	} else {
		ch.Delete = del
	}
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return errors.New("the search index is closed")
	}
	err = s.idx.Apply(ctx, ch)
	s.mu.RUnlock()
	if err != nil {
		return fmt.Errorf("apply event %d: %w", ev.Cursor, err)
	}
	s.cursor, s.unsaved = ev.Cursor, 0
	s.log.Debug("applied catalogue event", "cursor", ev.Cursor, "type", ev.Type, "entity", ev.Entity, "id", ev.ID)
	return nil
}

// flushCursor persists a cursor moved by skipped events.
func (s *service) flushCursor() {
	if s.unsaved == 0 {
		return
	}
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.closed {
		return
	}
	if err := s.idx.SetMeta(metaCursor, strconv.FormatUint(s.cursor, 10)); err != nil {
		s.log.Warn("search index could not save its cursor", "cursor", s.cursor, "err", err)
		return
	}
	s.unsaved = 0
}

// close stops the sync goroutine and closes the index. It may run more
// than once.
func (s *service) close() error {
	s.mu.Lock()
	cancel, done := s.cancel, s.done
	s.mu.Unlock()
	if cancel != nil {
		cancel()
		<-done
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed || s.idx == nil {
		s.closed = true
		return nil
	}
	s.closed = true
	if err := s.idx.Close(); err != nil {
		return err
	}
	return nil
}
