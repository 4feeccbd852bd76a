package verdict

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	"github.com/andybalholm/cascadia"
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
// that has one. That costs about as much time again as the streaming pass several times over
// and memory several times the body's size (a tree node per element and text run), and a page
// nested deeper than the parser's limit (512 open elements) cannot be parsed: its selector is
// not found. To keep the match linear in the page, a selector is made of type, #id, .class
// and [attribute] selectors joined by descendant, child (>) and next-sibling (+) combinators,
// in comma-separated groups; pseudo-classes (whose cost can grow with the square of the page:
// :has, :contains, :nth-child) and the ~ combinator are refused when it is compiled.
type Expect struct {
	selector string
	sel      cascadia.SelectorGroup // nil: no selector
	text     string                 // normalised; "": no text
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
		if err := linearSelector(selector); err != nil {
			return nil, fmt.Errorf("%w: selector %q: %w", ErrExpect, selector, err)
		}
		g, err := cascadia.ParseGroup(selector)
		if err != nil {
			return nil, fmt.Errorf("%w: selector %q: %w", ErrExpect, selector, err)
		}
		e.sel = g
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
	return cascadia.Query(doc, e.sel) != nil
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

// linearSelector refuses what cascadia would match at a cost beyond linear in the page:
// pseudo-classes and pseudo-elements (a ':' outside an attribute selector, a string or an
// escape) and the subsequent-sibling combinator '~'.
func linearSelector(sel string) error {
	var quote byte
	bracket := false
	for i := 0; i < len(sel); i++ {
		c := sel[i]
		switch {
		case c == '\\':
			i++ // an escaped character is part of a name (".sm\:hidden")
		case quote != 0:
			if c == quote {
				quote = 0
			}
		case c == '"' || c == '\'':
			quote = c
		case bracket:
			if c == ']' {
				bracket = false
			}
		case c == '[':
			bracket = true
		case c == ':':
			return errors.New("pseudo-classes are not allowed (put a text in expect.text)")
		case c == '~':
			return errors.New("the ~ combinator is not allowed")
		}
	}
	return nil
}
