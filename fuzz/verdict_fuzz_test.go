package fuzz

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"

	"github.com/freshq/freshq/verdict"
)

// verdictSeeds are pages and the pieces that end them early: an unterminated script, tag,
// comment or attribute, a head never closed, a template never closed, entities cut short.
var verdictSeeds = []string{
	`<!DOCTYPE html><html><head><title>Knife</title><meta name=description content="A knife">` +
		`<link rel="alternate canonical" href="/p"></head><body><h1>Knife</h1><p>Forged &amp; sharp</p>` +
		`<button id=add-to-cart>Add to cart</button><script>var s = "</p>"</script></body></html>`,
	`<html><head><title>Shop</title><script type=module src=/a.js></script></head><body><div id=root>Loading…</div>`,
	`<div class=error><h2>Something went wrong</h2></div><template><h1>x</h1>`,
	`<head><title>T</title>text<svg><title>icon</title></svg><h1><h2>x`,
	// A page with more visible text than MinText, so that the collapse rule is exercised.
	`<title>Catalogue</title><h1>Knives</h1><ul>` + strings.Repeat(`<li><a href=/p>Forged chef knife</a> &euro;129</li>`, 12) + `</ul>`,
	`<script>`, `<title>`, `<!--`, `<meta name="description" content="`, `<a href='`, `&am`, `<h1/>x`,
	"",
}

// verdictSettings are the configuration's defaults.
var verdictSettings = verdict.Settings{CollapseRatio: 0.33, MinText: 200, Agree: 3, AgreeSpan: 30 * time.Minute}

// FuzzInspect reads any body's landmarks, as the applier does for every render: Inspect never
// panics, changes nothing in the body, gives the same landmarks twice, and InspectExpect (with
// a text and with a selector) reads the same landmarks as Inspect, with Found agreeing; the
// expect selector's own matcher finds what cascadia finds (outside templates).
func FuzzInspect(f *testing.F) {
	for _, s := range verdictSeeds {
		f.Add([]byte(s))
	}
	text, err := verdict.CompileExpect("", "Add to cart")
	if err != nil {
		f.Fatal(err)
	}
	const selector = "#add-to-cart, main h1, div > p + p, ul li > a"
	sel, err := verdict.CompileExpect(selector, "")
	if err != nil {
		f.Fatal(err)
	}
	theirs := cascadia.MustCompile(selector)
	f.Fuzz(func(t *testing.T, body []byte) {
		kept := bytes.Clone(body)
		lm := verdict.Inspect(body)
		if !bytes.Equal(body, kept) {
			t.Fatalf("Inspect changed the body: %q → %q", kept, body)
		}
		if again := verdict.Inspect(body); again != lm {
			t.Fatalf("Inspect of the same body: %+v, then %+v", lm, again)
		}
		for _, exp := range []*verdict.Expect{text, sel} {
			got, found := verdict.InspectExpect(body, exp)
			if got != lm {
				t.Fatalf("InspectExpect(%v) read %+v, Inspect %+v", exp, got, lm)
			}
			if exp.Found(body) != found {
				t.Fatalf("Found(%v) disagrees with InspectExpect", exp)
			}
		}
		if !bytes.Equal(body, kept) {
			t.Fatalf("InspectExpect changed the body: %q → %q", kept, body)
		}
		if doc, err := html.Parse(bytes.NewReader(body)); err == nil {
			dropTemplates(doc)
			if want := cascadia.Query(doc, theirs) != nil; sel.Found(body) != want {
				t.Fatalf("selector %q: found %v, cascadia %v", selector, !want, want)
			}
		}
	})
}

// dropTemplates removes every <template>: its content is not part of the page, and cascadia,
// unlike an expect selector, would search it.
func dropTemplates(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && c.DataAtom == atom.Template {
			n.RemoveChild(c)
		} else {
			dropTemplates(c)
		}
		c = next
	}
}

// FuzzJudgePair judges one body against another as its last good render: Judge never panics,
// and a render identical to the last good one (Unchanged not set, as when the digest's
// normalisation differs) is never suspect for a landmark or a collapse, whatever the bytes.
func FuzzJudgePair(f *testing.F) {
	for i, s := range verdictSeeds {
		f.Add([]byte(s), []byte(verdictSeeds[(i+1)%len(verdictSeeds)]))
	}
	exp, err := verdict.CompileExpect("", "Add to cart")
	if err != nil {
		f.Fatal(err)
	}
	const landmarks = verdict.TextCollapsed | verdict.LostTitle | verdict.LostH1 |
		verdict.LostDescription | verdict.LostCanonical
	f.Fuzz(func(t *testing.T, a, b []byte) {
		last, _ := verdict.InspectExpect(a, exp)
		lm, found := verdict.InspectExpect(b, exp)
		r := verdict.Render{Landmarks: lm, ExpectFound: found}
		v := verdict.Judge(&verdictSettings, &r, &last, exp)
		if !v.Reasons.Known() {
			t.Fatalf("Judge gave reasons it does not know: %b", v.Reasons)
		}
		if lm.TextLen >= last.TextLen && v.Reasons&verdict.TextCollapsed != 0 {
			t.Fatalf("text grew from %d to %d bytes, judged collapsed", last.TextLen, lm.TextLen)
		}
		self := verdict.Render{Landmarks: last, ExpectFound: exp.Found(a)}
		if got := verdict.Judge(&verdictSettings, &self, &last, exp); got.Reasons&landmarks != 0 {
			t.Fatalf("a body judged against its own landmarks %+v is suspect: %v", last, got.Reasons)
		}
	})
}
