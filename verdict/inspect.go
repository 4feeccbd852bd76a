package verdict

import (
	"bytes"
	"math"

	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// Inspect reads an HTML body's landmarks. It never panics, whatever the bytes.
//
// It streams the body through html.Tokenizer and builds no tree: its work is linear in the
// body, and its memory a few words of state plus the tokenizer's buffer, which holds at most
// the longest single token.
func Inspect(body []byte) Landmarks {
	lm, _ := InspectExpect(body, nil)
	return lm
}

// InspectExpect reads an HTML body's landmarks and reports whether it has what exp expects, in
// one pass over the body when exp has no selector (a text expectation is matched while the
// landmarks are read). A selector needs a parse tree, built only then (see Expect). A nil exp
// is found. The applier calls this once per render: Inspect and Found are the same work split.
func InspectExpect(body []byte, exp *Expect) (Landmarks, bool) {
	var s scanner
	if exp != nil && exp.text != "" {
		s.needle = exp.text
		s.window = make([]byte, 0, textWindow+len(exp.text))
	}
	s.run(body)
	found := exp == nil || exp.text == "" || s.matched
	if found && exp != nil && exp.sel != nil {
		found = exp.selectorFound(body)
	}
	return s.lm, found
}

// textWindow is how much normalised visible text the scanner gathers before it looks for an
// expected text in it: large enough that the search runs rarely, small enough to be nothing
// next to the body.
const textWindow = 32 << 10

// scanner is Inspect's state while it streams one body.
type scanner struct {
	lm      Landmarks
	text    uint64 // visible text bytes, whitespace runs counted once
	space   bool   // whitespace followed the last visible text: one space, counted when text follows
	inHead  bool   // inside <head>
	headEnd bool   // the head is over (or never can be): a later <head> tag opens nothing
	tmpl    int    // depth of <template> (inert content)
	foreign int    // depth of <svg>/<math>: a <title> there is not the document's
	raw     atom.Atom
	h1      bool // inside an <h1>
	titled  bool // the document's title element was seen (only the first counts)
	isTitle bool // the raw text being read is the document's title

	// The expected text, matched against the normalised visible text (runs of whitespace as
	// one space, leading whitespace dropped); window holds the text not yet searched plus the
	// last len(needle)-1 bytes already searched, so that a match across two chunks is found.
	needle  string
	window  []byte
	matched bool
}

// invisible reports whether a raw-text element's content is never shown: the tokenizer hands
// such content over as one text token.
func invisible(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Iframe, atom.Noembed, atom.Noframes:
		return true
	}
	return false
}

// rawText is the tokenizer's list of elements whose content is one text token.
func rawText(a atom.Atom) bool {
	switch a {
	case atom.Script, atom.Style, atom.Noscript, atom.Iframe, atom.Noembed, atom.Noframes,
		atom.Textarea, atom.Title, atom.Xmp, atom.Plaintext:
		return true
	}
	return false
}

// headContent is what may stand in <head>; any other start tag ends it, as the HTML parser
// ends it (a head whose end tag was left out).
func headContent(a atom.Atom) bool {
	switch a {
	case atom.Base, atom.Basefont, atom.Bgsound, atom.Link, atom.Meta, atom.Title, atom.Noscript,
		atom.Noframes, atom.Style, atom.Script, atom.Template, atom.Head:
		return true
	}
	return false
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\f' || c == '\r' }

func blank(b []byte) bool {
	for _, c := range b {
		if !isSpace(c) {
			return false
		}
	}
	return true
}

func (s *scanner) run(body []byte) {
	z := html.NewTokenizer(bytes.NewReader(body))
	for {
		tt := z.Next()
		switch tt {
		case html.ErrorToken:
			s.finish()
			return
		case html.TextToken:
			s.onText(z.Text())
		case html.StartTagToken, html.SelfClosingTagToken:
			name, hasAttr := z.TagName()
			a := atom.Lookup(name)
			s.onStart(z, a, hasAttr, tt == html.SelfClosingTagToken)
		case html.EndTagToken:
			name, _ := z.TagName()
			s.onEnd(atom.Lookup(name))
		}
		// Comments and doctypes are not text.
	}
}

func (s *scanner) onText(t []byte) {
	raw := s.raw
	if raw != 0 && raw != atom.Plaintext {
		// The tokenizer gives a raw-text element's content as the token after its start
		// tag; the element ends with its end tag, which clears raw.
		switch {
		case raw == atom.Title:
			if s.isTitle && !blank(t) {
				s.lm.Title = true
			}
			return
		case invisible(raw):
			return
		}
	}
	if s.tmpl > 0 {
		return
	}
	if s.inHead {
		if blank(t) {
			return
		}
		// Text in the head ends it: the parser moves it into the body, where it shows.
		s.inHead, s.headEnd = false, true
	}
	if !blank(t) {
		s.headEnd = true
		if s.h1 {
			s.lm.H1 = true
		}
	}
	s.visible(t)
}

// visible counts t as visible text and feeds it to the expected text's search. A run of
// whitespace counts as one byte, and only between text: one that leads or trails counts nothing.
func (s *scanner) visible(t []byte) {
	for _, c := range t {
		if isSpace(c) {
			s.space = s.text > 0
			continue
		}
		if s.space {
			s.space = false
			s.emit(' ')
		}
		s.emit(c)
	}
}

func (s *scanner) emit(c byte) {
	s.text++
	if s.needle != "" && !s.matched {
		s.window = append(s.window, c)
		if len(s.window) >= cap(s.window) {
			s.search()
		}
	}
}

// search looks for the needle in the window and keeps only the tail a later match could start in.
func (s *scanner) search() {
	if bytes.Contains(s.window, []byte(s.needle)) {
		s.matched, s.window = true, nil
		return
	}
	keep := len(s.needle) - 1
	if keep > len(s.window) {
		keep = len(s.window)
	}
	n := copy(s.window, s.window[len(s.window)-keep:])
	s.window = s.window[:n]
}

func (s *scanner) finish() {
	if s.needle != "" && !s.matched {
		s.search()
	}
	if s.text > math.MaxUint32 {
		s.text = math.MaxUint32
	}
	s.lm.TextLen = uint32(s.text)
}

func (s *scanner) onStart(z *html.Tokenizer, a atom.Atom, hasAttr, selfClosing bool) {
	if rawText(a) {
		// The tokenizer reads the next token as raw text even after "<script/>", as HTML does.
		s.raw = a
		if a == atom.Title {
			// The document's title is its first <title> outside svg, math and templates.
			s.isTitle = !s.titled && s.tmpl == 0 && s.foreign == 0
			s.titled = s.titled || s.isTitle
		}
	}
	if !headContent(a) && a != atom.Html {
		// Any other element (a custom element too) ends the head, or means it is over.
		s.inHead, s.headEnd = false, true
	}
	switch a {
	case atom.Head:
		if !s.headEnd {
			s.inHead, s.headEnd = true, true
		}
		return
	case atom.Template:
		// "/>" closes only void and foreign elements: "<template/>" opens a template.
		s.tmpl++
		return
	case atom.Svg, atom.Math:
		if !selfClosing {
			s.foreign++
		}
	case atom.H1:
		s.h1 = true
		return
	case atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		// A heading start tag closes an open heading (the parser's rule).
		s.h1 = false
	}
	if s.tmpl > 0 || !hasAttr {
		return
	}
	switch a {
	case atom.Meta:
		s.lm.Description = metaDescription(z) || s.lm.Description
	case atom.Link:
		s.lm.Canonical = linkCanonical(z) || s.lm.Canonical
	}
}

func (s *scanner) onEnd(a atom.Atom) {
	if a == s.raw && a != 0 {
		s.raw = 0
	}
	switch a {
	case atom.Head, atom.Body, atom.Html, atom.Br:
		if s.inHead {
			s.inHead = false
		}
	case atom.Template:
		if s.tmpl > 0 {
			s.tmpl--
		}
	case atom.Svg, atom.Math:
		if s.foreign > 0 {
			s.foreign--
		}
	case atom.H1, atom.H2, atom.H3, atom.H4, atom.H5, atom.H6:
		s.h1 = false
	}
}

// metaDescription reports whether the tag being read is <meta name="description"> with
// non-empty content (the name compared without case).
func metaDescription(z *html.Tokenizer) bool {
	var named, content bool
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "name":
			named = bytes.EqualFold(bytes.TrimFunc(v, isSpaceRune), []byte("description"))
		case "content":
			content = !blank(v)
		}
	}
	return named && content
}

// linkCanonical reports whether the tag being read is a <link> whose rel tokens include
// canonical, with a non-empty href.
func linkCanonical(z *html.Tokenizer) bool {
	var canonical, href bool
	for more := true; more; {
		var k, v []byte
		k, v, more = z.TagAttr()
		switch string(k) {
		case "rel":
			canonical = false
			for _, tok := range bytes.FieldsFunc(v, isSpaceRune) {
				if bytes.EqualFold(tok, []byte("canonical")) {
					canonical = true
				}
			}
		case "href":
			href = !blank(v)
		}
	}
	return canonical && href
}

func isSpaceRune(r rune) bool { return r < 0x80 && isSpace(byte(r)) }
