package apply

import (
	"container/list"
	"maps"
	"slices"
	"sync"

	"github.com/freshq/freshq/cachekey"
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/verdict"
)

// Suspects keeps the bodies of the suspect renders that were not applied, beside the good page
// that is still served, so that an operator can look at what the site answered
// (GET /v1/suspects/page) and apply it (Applier.Accept) when it is the site's real change.
//
// It is worker 0's memory, not the store, on purpose: a kept body is an inspection aid, not
// state anything depends on. The verdict state itself (the last good render's landmarks, the
// last verdict, the suspects' agreement, the mark) is durable in the target and survives a
// restart; the bodies do not, and nothing is lost with them but the chance to look before the
// next suspect render keeps one again. Keeping them in the store would put a second page per
// key on disk, written on every suspect render, for a read that is rare.
//
// It is bounded in bytes (intake.Settings.KeepBytes, read at each Put): one entry per key, the newest
// render winning; past the bound, the oldest entries are evicted. Safe for concurrent use.
type Suspects struct {
	mu    sync.Mutex
	order *list.List // of *Suspect, oldest first
	byKey map[string]*list.Element
	bytes int64
}

// Suspect is one kept suspect render.
type Suspect struct {
	Key     string
	URL     string
	Device  string
	Site    string // the site of its host (intake.Settings.SiteOf)
	Reasons verdict.Reasons
	AtMs    int64
	Agree   int // the suspect renders in a row with this content, this one included
	Digest  uint64
	Status  int
	Headers map[string]string
	Body    []byte
	// Landmarks are verdict.Inspect of Body, which become the good ones if it is accepted.
	Landmarks verdict.Landmarks
}

// size is what an entry counts against the bound: its body, key and headers.
func (s *Suspect) size() int64 {
	n := len(s.Body) + len(s.Key) + len(s.URL)
	for k, v := range s.Headers {
		n += len(k) + len(v)
	}
	return int64(n)
}

// NewSuspects returns an empty store.
func NewSuspects() *Suspects {
	return &Suspects{order: list.New(), byKey: map[string]*list.Element{}}
}

// Put keeps e, replacing the key's entry, then evicts the oldest entries while more than limit
// bytes are kept. An entry larger than limit is not kept at all.
func (s *Suspects) Put(e *Suspect, limit int64) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(e.Key)
	if e.size() > limit {
		return
	}
	s.byKey[e.Key] = s.order.PushBack(e)
	s.bytes += e.size()
	for s.bytes > limit {
		s.dropLocked(s.order.Front().Value.(*Suspect).Key)
	}
}

// Drop forgets key's entry (a good render, or the entry accepted).
func (s *Suspects) Drop(key []byte) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropLocked(string(key))
}

func (s *Suspects) dropLocked(key string) {
	if el, ok := s.byKey[key]; ok {
		s.bytes -= el.Value.(*Suspect).size()
		s.order.Remove(el)
		delete(s.byKey, key)
	}
}

// Get returns key's entry. The entry is shared: it is never changed once kept.
func (s *Suspects) Get(key []byte) (*Suspect, bool) {
	if s == nil {
		return nil, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	el, ok := s.byKey[string(key)]
	if !ok {
		return nil, false
	}
	return el.Value.(*Suspect), true
}

// Site returns the entries of site (every entry for ""), newest first.
func (s *Suspects) Site(site string) []*Suspect {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []*Suspect
	for el := s.order.Back(); el != nil; el = el.Prev() {
		if e := el.Value.(*Suspect); site == "" || e.Site == site {
			out = append(out, e)
		}
	}
	return out
}

// Bytes is what the entries count against the bound now.
func (s *Suspects) Bytes() int64 {
	if s == nil {
		return 0
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.bytes
}

func newSuspect(set *intake.Settings, key []byte, reasons verdict.Reasons, now int64, agree int, digest uint64,
	status int, headers map[string]string, body []byte, lm verdict.Landmarks) *Suspect {
	device, url, _ := cachekey.Split(key)
	return &Suspect{Key: string(key), URL: url, Device: device, Site: set.SiteOf(key), Reasons: reasons, AtMs: now,
		Agree: agree, Digest: digest, Status: status, Headers: maps.Clone(headers), Body: slices.Clone(body), Landmarks: lm}
}
