package verdict

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"golang.org/x/net/html"
)

// Expect is a compiled routes[].expect: a CSS selector, a text, or both, that every good page
// of a route has. A page lacking it is suspect (ExpectMissing).
//
// The text is matched case-sensitively against the page's visible text (what Inspect counts:
// outside script, style, template, noscript and head) with every run of whitespace, in the
// page and in the text, taken as one space; elements join their text with nothing between, so
// "<b>Add</b> to cart" has "Add to cart". It is found in the same streaming pass that reads the
// landmarks, in bounded memory.
//
// A selector needs a parse tree: InspectExpect parses the body with html.Parse only for a route
// that has one, which costs about three times the streaming pass and memory a few times the
// body's size (a node per element and text run). A page nested deeper than the parser's limit
// (512 open elements) cannot be parsed: its selector is not found. The selector is type, #id,
// .class and [attribute] selectors joined by descendant, child (>) and next-sibling (+)
// combinators, in comma-separated alternatives (at most 16, of at most 64 compounds each); it
// is matched in one walk of the tree, one compound test per element and compound. Pseudo-classes
// (:has, :contains, :nth-child, whose cost can grow with the square of the page) and the ~
// combinator are refused when it is compiled. The content of a <template> is not searched.
type Expect struct {
	selector string
	sel      *selector // nil: no selector
	text     string    // normalised; "": no text
}

// MaxExpectText is the longest expected text, in bytes after its whitespace is normalised: a
// phrase that every good page has, not a paragraph.
const MaxExpectText = 1024

// ErrExpect is wrapped by every error CompileExpect returns.
var ErrExpect = errors.New("invalid expect")

// CompileExpect compiles a route's expect. Either may be empty; with both empty it returns a
// nil Expect (the route expects nothing) and no error.
func CompileExpect(selector, text string) (*Expect, error) {
	selector = strings.TrimSpace(selector)
	norm := normaliseText(text)
	if text != "" && norm == "" {
		return nil, fmt.Errorf("%w: text is only whitespace", ErrExpect)
	}
	if len(norm) > MaxExpectText {
		return nil, fmt.Errorf("%w: text is %d bytes, over %d", ErrExpect, len(norm), MaxExpectText)
	}
	if selector == "" && norm == "" {
		return nil, nil
	}
	e := &Expect{selector: selector, text: norm}
	if selector != "" {
		sel, err := parseSelector(selector)
		if err != nil {
			return nil, fmt.Errorf("%w: selector %q: %w", ErrExpect, selector, err)
		}
		e.sel = sel
	}
	return e, nil
}

// Found reports whether the body (HTML) has what e expects; a nil e expects nothing, and is
// found. InspectExpect does the same work while it reads the landmarks.
func (e *Expect) Found(body []byte) bool {
	if e == nil {
		return true
	}
	_, found := InspectExpect(body, e)
	return found
}

// String is the expectation as configured (normalised), for logs.
func (e *Expect) String() string {
	if e == nil {
		return "nothing"
	}
	var parts []string
	if e.selector != "" {
		parts = append(parts, "selector "+e.selector)
	}
	if e.text != "" {
		parts = append(parts, fmt.Sprintf("text %q", e.text))
	}
	return strings.Join(parts, " and ")
}

func (e *Expect) selectorFound(body []byte) bool {
	doc, err := html.Parse(bytes.NewReader(body))
	if err != nil {
		// Only a page nested past the parser's limit: nothing can be matched in it.
		return false
	}
	return e.sel.found(doc)
}

// normaliseText trims s and takes each run of whitespace in it as one space, as the page's
// visible text is taken.
func normaliseText(s string) string {
	var b strings.Builder
	space := true
	for i := 0; i < len(s); i++ {
		c := s[i]
		if isSpace(c) {
			if !space {
				b.WriteByte(' ')
			}
			space = true
			continue
		}
		space = false
		b.WriteByte(c)
	}
	return strings.TrimSuffix(b.String(), " ")
}
