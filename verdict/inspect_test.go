package verdict

import (
	"bytes"
	"os"
	"strings"
	"testing"
)

func page(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile("testdata/" + name + ".html")
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestInspect pins what counts as visible text and as each landmark: the rules a render is
// compared by, so a change to them is a change to which renders are suspect.
func TestInspect(t *testing.T) {
	for _, tc := range []struct {
		name string
		body string
		want Landmarks
	}{
		{"empty", "", Landmarks{}},
		{"text only", "hello", Landmarks{TextLen: 5}},
		{"whitespace runs count once, leading and trailing ones not at all", " \n a \t\r\n b  ", Landmarks{TextLen: 3}},
		{"runs across tags count once", "a <b> </b> b", Landmarks{TextLen: 3}},
		{"entities count as their text", "a&amp;b", Landmarks{TextLen: 3}},
		{"script, style, noscript, template, iframe are not text",
			"<script>var x = 'lots of code';</script><style>p{color:red}</style><noscript>enable js</noscript>" +
				"<template><p>later</p></template><iframe>fallback</iframe>ok", Landmarks{TextLen: 2}},
		{"comments are not text", "<!-- a long comment -->ok<!---->", Landmarks{TextLen: 2}},
		{"head is not text", "<html><head><title>T</title><meta charset=utf-8></head><body>body</body>",
			Landmarks{TextLen: 4, Title: true}},
		{"a head without its end tag ends at the first body element",
			"<html><head><title>T</title><div>body</div>", Landmarks{TextLen: 4, Title: true}},
		{"a head without its end tag ends at text", "<head><title>T</title>body text",
			Landmarks{TextLen: 9, Title: true}},
		{"a late <head> tag hides nothing", "<body>a<head>b</head>c", Landmarks{TextLen: 3}},
		{"textarea and xmp are shown", "<textarea>ab</textarea><xmp>cd</xmp>", Landmarks{TextLen: 4}},
		{"blank title", "<title>  \n </title>x", Landmarks{TextLen: 1}},
		{"only the first title is the document's", "<title></title><title>T</title>", Landmarks{}},
		{"an svg title is not the document's", "<svg><title>icon</title></svg>", Landmarks{}},
		{"title after an svg", "<svg><title>icon</title></svg><title>T</title>", Landmarks{Title: true}},
		{"h1 with text", "<h1> Product </h1>", Landmarks{TextLen: 7, H1: true}},
		{"h1 with only markup", "<h1><img src=x.png> </h1>", Landmarks{}},
		{"h1 with only a script", "<h1><script>render()</script></h1>", Landmarks{}},
		{"h1 with nested text", "<h1><span>Pro</span>duct</h1>", Landmarks{TextLen: 7, H1: true}},
		{"text after a closed h1 is not the h1's", "<h1></h1><p>x</p>", Landmarks{TextLen: 1}},
		{"an h2 closes an open h1", "<h1><h2>x</h2>", Landmarks{TextLen: 1}},
		{"h1 in a template", "<template><h1>x</h1></template>", Landmarks{}},
		{"description", `<meta name="description" content="A page">`, Landmarks{Description: true}},
		{"description: name without case", `<META NAME="Description" CONTENT="A page">`, Landmarks{Description: true}},
		{"description: blank content", `<meta name="description" content=" ">`, Landmarks{}},
		{"description: no content", `<meta name="description">`, Landmarks{}},
		{"description: another name", `<meta name="keywords" content="a">`, Landmarks{}},
		{"description: property", `<meta property="og:description" content="a">`, Landmarks{}},
		{"description in a template", `<template><meta name="description" content="A page"></template>`, Landmarks{}},
		{"canonical", `<link rel="canonical" href="/p">`, Landmarks{Canonical: true}},
		{"canonical: rel is a token list", `<link rel="alternate  Canonical" href="/p">`, Landmarks{Canonical: true}},
		{"canonical: no href", `<link rel="canonical">`, Landmarks{}},
		{"canonical: empty href", `<link rel="canonical" href="">`, Landmarks{}},
		{"canonical: a word, not a token", `<link rel="noncanonical" href="/p">`, Landmarks{}},
		{"unterminated script hides the rest", "a<script>b c d", Landmarks{TextLen: 1}},
		{"unterminated tag", "ab<div class=", Landmarks{TextLen: 2}},
		{"NUL bytes", "a\x00b", Landmarks{TextLen: 3}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Inspect([]byte(tc.body)); got != tc.want {
				t.Errorf("Inspect(%q) = %+v, want %+v", tc.body, got, tc.want)
			}
		})
	}
}

func TestInspectPages(t *testing.T) {
	all := Landmarks{Title: true, H1: true, Description: true, Canonical: true}
	for _, tc := range []struct {
		page    string
		want    Landmarks // TextLen: at least
		minText uint32
	}{
		{"product", all, 20000},
		{"catalogue", all, 90000},
		{"spa-error", Landmarks{Title: true, Description: true, Canonical: true}, 0},
		{"loading", Landmarks{Title: true}, 0},
		{"maintenance", Landmarks{Title: true, H1: true}, 0},
	} {
		got := Inspect(page(t, tc.page))
		text := got.TextLen
		got.TextLen = 0
		if got != tc.want || text < tc.minText {
			t.Errorf("%s: %+v with %d bytes of text, want %+v with at least %d", tc.page, got, text, tc.want, tc.minText)
		}
	}
	// The loading shell's only text is its "Loading…".
	if got := Inspect(page(t, "loading")).TextLen; got != uint32(len("Loading…")) {
		t.Errorf("loading shell: %d bytes of text, want %d", got, len("Loading…"))
	}
}

// TestInspectLargePage reads a page of the largest size a render may have (32 MiB) made of one
// text token and of many small elements: it ends, with the text counted.
func TestInspectLargePage(t *testing.T) {
	const size = 32 << 20
	one := bytes.Repeat([]byte("ab "), size/3)
	if got := Inspect(one).TextLen; got != uint32(len(one)-1) {
		t.Errorf("one text token: %d bytes of text, want %d (its trailing space not counted)", got, len(one)-1)
	}
	many := []byte(strings.Repeat("<div><b>x</b></div>", size/19))
	if got := Inspect(many).TextLen; got != uint32(size/19) {
		t.Errorf("many elements: %d bytes of text, want %d", got, size/19)
	}
	deep := []byte(strings.Repeat("<div>", size/5))
	if got := Inspect(deep).TextLen; got != 0 {
		t.Errorf("deep nesting: %d bytes of text, want 0", got)
	}
}

// TestInspectLeavesTheBody: Inspect reads its input and changes none of it (the tokenizer
// unescapes in its own buffer).
func TestInspectLeavesTheBody(t *testing.T) {
	b := page(t, "product")
	kept := bytes.Clone(b)
	exp, err := CompileExpect("#add-to-cart", "Add to cart")
	if err != nil {
		t.Fatal(err)
	}
	InspectExpect(b, exp)
	if !bytes.Equal(b, kept) {
		t.Fatal("Inspect changed the body")
	}
}
