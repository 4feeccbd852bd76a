package verdict

import (
	"bytes"
	"strings"
	"testing"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

var selectorPages = []string{
	`<div id=a><p class="x y">1</p><!-- c --><p>2</p>text<span title="a b">3</span></div><p id=z>4</p>`,
	`<ul><li class=card><a href="/p/1"><h2 class=name>n</h2></a><p class=price>€1</p></li><li class=card><button data-sku=S1>Add</button></li></ul>`,
	`<main><section class=buy><h1>T</h1><p class=price>1</p></section></main><footer><section><h3>Help</h3></section></footer>`,
	`<div><div><div><span><span><b>deep</b></span></span></div></div></div><i id="123">id</i><i id="1a">id</i>`,
	`<table><tr><th>a</th><td>b</td></tr></table><a rel="next prev" href=/2>n</a>`,
}

var selectorCases = []string{
	"p", "div p", "div > p", "p + p", "p + span", "div > span", "body > p", "#a > #z", "#z",
	".x", ".x.y", ".y.z", "p.x + p", "[title]", `[title="a b"]`, "[rel~=next]", `a[href^="/p/"]`,
	"li.card button[data-sku]", "ul > li > a > h2.name", "li + li > button", "main section.buy h1",
	"main h3", "footer section h3", "div div span b", "div div div div b", "div > div > span",
	"span span b", "span > span > b", `#\31 23`, `#\31 a`, "*", "* > b", "table td", "tr > td + th",
	"th + td", "h1, h3", "nav, .price", "section.buy + section", "html body main",
}

// withoutTemplates removes every <template> from the tree: the content of a template is not
// part of the page, and cascadia, unlike the expect selector, would search it.
func withoutTemplates(n *html.Node) {
	for c := n.FirstChild; c != nil; {
		next := c.NextSibling
		if c.Type == html.ElementNode && c.DataAtom == atom.Template {
			n.RemoveChild(c)
		} else {
			withoutTemplates(c)
		}
		c = next
	}
}

// TestSelectorMatchesAsCascadia: the expect selector's one-walk matcher finds exactly what
// cascadia's own matching finds, over real-looking pages and small ones made to exercise each
// combinator, escapes, attribute lists and alternatives.
func TestSelectorMatchesAsCascadia(t *testing.T) {
	pages := append([]string(nil), selectorPages...)
	for _, name := range []string{"product", "catalogue", "spa-error", "loading", "maintenance"} {
		pages = append(pages, string(page(t, name)))
	}
	hits := 0
	for _, sel := range selectorCases {
		ours, err := parseSelector(sel)
		if err != nil {
			t.Errorf("%q: %v", sel, err)
			continue
		}
		theirs := cascadia.MustCompile(sel)
		for i, p := range pages {
			doc, err := html.Parse(strings.NewReader(p))
			if err != nil {
				t.Fatal(err)
			}
			withoutTemplates(doc)
			want := cascadia.Query(doc, theirs) != nil
			if got := ours.found(doc); got != want {
				t.Errorf("%q on page %d: found %v, cascadia %v", sel, i, got, want)
			}
			if want {
				hits++
			}
		}
	}
	if hits == 0 || hits == len(selectorCases)*len(pages) {
		t.Errorf("%d hits: the cases do not tell found from missing", hits)
	}
}

func TestSelectorRefusals(t *testing.T) {
	for _, bad := range []string{
		"div:has(p)", "p::before", "h1 ~ p", "> p", "p >", "p > > a", "p,", ",p", "a[href", `a "x"`,
		"p(", "#", strings.Repeat("a ", maxCompounds+1), strings.Repeat("a,", maxAlternatives) + "a",
	} {
		if _, err := parseSelector(bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

// countSel counts the compound tests a match makes.
type countSel struct {
	cascadia.Sel
	n *int
}

func (c countSel) Match(n *html.Node) bool { *c.n++; return c.Sel.Match(n) }

// TestSelectorWorkIsLinear: chains of descendant combinators on a page nested as deep as the
// parser allows cost at most one compound test per element and compound: one chain whose every
// prefix matches everywhere (the most work for the one-walk matcher), one whose last compound
// matches everywhere and first nowhere. On this page (10,000 elements, 130 KB) cascadia's own
// matching, which walks every ancestor once per combinator, took 1.5 s for "x span span" and
// had not finished "x span span span" after 5 minutes.
func TestSelectorWorkIsLinear(t *testing.T) {
	body := strings.Repeat("<span>", 500) + strings.Repeat("</span>", 500)
	body = strings.Repeat(body, 20)
	doc, err := html.Parse(strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	elements := bytes.Count([]byte(body), []byte("<span>")) + 3 // html, head, body
	for _, sel := range []string{"span span span span b", "x span span span"} {
		s, err := parseSelector(sel)
		if err != nil {
			t.Fatal(err)
		}
		tests := 0
		comps := s.alts[0].comps
		for i := range comps {
			comps[i] = countSel{comps[i], &tests}
		}
		if s.found(doc) {
			t.Fatalf("%q found in a page without it", sel)
		}
		if limit := elements * len(comps); tests > limit {
			t.Errorf("%q: %d compound tests for %d elements and %d compounds: more than %d", sel, tests, elements, len(comps), limit)
		}
	}
}
