package netidle

import (
	"fmt"
	"testing"
	"time"

	"github.com/chromedp/cdproto/network"
)

// A page is settled only once it made a data request and every one has ended: settle after the
// last request began or ended, not before; a request an answer sets off holds it again; a page
// with no data request never is (it has only Quiet).
func TestSettledByTheAnswers(t *testing.T) {
	const settle, long, dataWait = 150 * time.Millisecond, 2 * time.Second, 10 * time.Second
	t0 := time.Unix(1000, 0)
	a := NewActivity()
	a.Sent("doc", network.ResourceTypeDocument, false, "", t0)
	a.End("doc", t0.Add(10*time.Millisecond))
	if a.Settled(t0.Add(time.Second), settle, long, dataWait) {
		t.Error("settled without a data request")
	}
	a.Sent("list", network.ResourceTypeFetch, true, "http://site.test/api/list", t0.Add(20*time.Millisecond))
	if a.Settled(t0.Add(time.Second), settle, long, dataWait) {
		t.Error("settled with the data request in flight")
	}
	a.End("list", t0.Add(300*time.Millisecond))
	if a.Settled(t0.Add(300*time.Millisecond+settle-time.Millisecond), settle, long, dataWait) {
		t.Error("settled before render.chrome.settle passed")
	}
	a.Sent("detail", network.ResourceTypeFetch, true, "http://site.test/api/detail", t0.Add(310*time.Millisecond))
	if a.Settled(t0.Add(time.Second), settle, long, dataWait) {
		t.Error("settled while the request the answer set off is in flight")
	}
	a.End("detail", t0.Add(600*time.Millisecond))
	if !a.Settled(t0.Add(600*time.Millisecond+settle), settle, long, dataWait) {
		t.Errorf("not settled after the answers: %v", a.inflight)
	}
}

// A data request to a known long-poll holds nothing, is still pending, and is not overdue (it is
// known already); an unknown one past data_wait is overdue, and one not yet past it is not.
func TestKnownPollHoldsNothingAndStaysPending(t *testing.T) {
	const idle, settle, long, dataWait = 500 * time.Millisecond, 150 * time.Millisecond, 2 * time.Second, 10 * time.Second
	t0 := time.Unix(1000, 0)
	a := NewActivity()
	a.Sent("poll", network.ResourceTypeFetch, true, "http://site.test/api/poll?since=1", t0)
	a.KnownPoll("poll")
	if !a.Quiet(t0.Add(idle), idle, long, dataWait) {
		t.Error("a known long-poll holds the page")
	}
	if a.Settled(t0.Add(idle), settle, long, dataWait) {
		t.Error("settled on a known long-poll alone: no data request was answered")
	}
	if got := a.PendingData(); len(got) != 1 {
		t.Errorf("pending %q, want the known long-poll", got)
	}
	b := NewActivity()
	b.Sent("slow", network.ResourceTypeFetch, true, "http://site.test/api/slow", t0)
	if got := b.Overdue(t0.Add(dataWait), long, dataWait); len(got) != 0 {
		t.Errorf("overdue at exactly data_wait: %q", got)
	}
	if got := b.Overdue(t0.Add(dataWait+time.Millisecond), long, dataWait); len(got) != 1 || got[0] != "http://site.test/api/slow" {
		t.Errorf("overdue past data_wait: %q", got)
	}
	if got := a.Overdue(t0.Add(time.Hour), long, dataWait); len(got) != 0 {
		t.Errorf("a known long-poll is overdue again: %q", got)
	}
}

// Long-polls are known by scheme, host and path (not the query); forgotten one by one or all;
// at most maxLongPolls, the one learnt longest ago dropped first.
func TestLongPolls(t *testing.T) {
	var p LongPolls
	if p.Known("http://site.test/api/poll") {
		t.Fatal("known before any was learnt")
	}
	p.Learn("http://Site.test/api/poll?since=1")
	if !p.Known("http://site.test/api/poll?since=2") || p.Known("http://site.test/api/other") || p.Known("https://site.test/api/poll") {
		t.Error("known by more or less than scheme, host and path")
	}
	p.Forget("http://site.test/api/poll?since=3")
	if p.Known("http://site.test/api/poll") {
		t.Error("still known after Forget")
	}
	for i := range maxLongPolls + 1 {
		p.Learn(fmt.Sprintf("http://site.test/poll/%d", i))
	}
	if p.Known("http://site.test/poll/0") || !p.Known("http://site.test/poll/1") || !p.Known(fmt.Sprintf("http://site.test/poll/%d", maxLongPolls)) {
		t.Error("past maxLongPolls the one learnt longest ago is not the one dropped")
	}
	p.Clear()
	if p.Known("http://site.test/poll/1") {
		t.Error("known after Clear")
	}
}
