package verdict

import (
	"errors"
	"fmt"
	"strings"

	"github.com/andybalholm/cascadia"
	"golang.org/x/net/html"
	"golang.org/x/net/html/atom"
)

// selector is an expect selector: alternatives (a comma-separated group), each a chain of
// compound selectors joined by combinators. Cascadia matches each compound (type, #id, .class,
// [attribute]) on one element; the combinators are matched here, in one walk of the tree that
// carries, for each element, which prefixes of the chain end at it, at its parent, at its
// previous element sibling and at any ancestor. So a match costs one compound test per element
// and compound, whatever the chain: cascadia's own matching of a descendant combinator walks
// every ancestor of every candidate, once per combinator in the chain.
type selector struct {
	alts []chain
}

// chain is one alternative: comps[i] joined to comps[i-1] by comb[i] (' ' descendant, '>'
// child, '+' next sibling); comb[0] is unused.
type chain struct {
	comps []cascadia.Sel
	comb  []byte
}

// maxCompounds bounds a chain's compounds: a prefix set is one word.
const maxCompounds = 64

// maxAlternatives bounds a selector's alternatives, each one walk of the tree.
const maxAlternatives = 16

var errPseudo = errors.New("pseudo-classes and pseudo-elements are not allowed (a text belongs in expect.text)")

// parseSelector splits sel into alternatives, compounds and combinators, and compiles each
// compound with cascadia. It refuses what cannot be matched in one linear walk: pseudo-classes
// and pseudo-elements (a ':' outside an attribute selector, a string or an escape) and the
// subsequent-sibling combinator '~'.
func parseSelector(sel string) (*selector, error) {
	var s selector
	var cur chain
	var comp strings.Builder
	pending := byte(0) // the combinator read since the last compound: 0 none yet, ' ', '>', '+'
	endCompound := func() error {
		if comp.Len() == 0 {
			return nil
		}
		text := comp.String()
		comp.Reset()
		if len(cur.comps) == 0 && pending != 0 && pending != ' ' {
			return fmt.Errorf("%q starts with the combinator %q", sel, pending)
		}
		c, err := cascadia.Parse(text)
		if err != nil {
			return err
		}
		if len(cur.comps) == maxCompounds {
			return fmt.Errorf("more than %d compound selectors in one alternative", maxCompounds)
		}
		cur.comps = append(cur.comps, c)
		cur.comb = append(cur.comb, pending)
		pending = 0
		return nil
	}
	endChain := func() error {
		if err := endCompound(); err != nil {
			return err
		}
		if len(cur.comps) == 0 || (pending != 0 && pending != ' ') {
			return fmt.Errorf("%q has an empty alternative or ends with a combinator", sel)
		}
		if len(s.alts) == maxAlternatives {
			return fmt.Errorf("more than %d alternatives", maxAlternatives)
		}
		s.alts = append(s.alts, cur)
		cur, pending = chain{}, 0
		return nil
	}
	var quote byte
	bracket := false
	for i := 0; i < len(sel); i++ {
		c := sel[i]
		switch {
		case c == '\\':
			// An escape is part of the name it is in: one character, or up to six hex digits
			// and one whitespace after them.
			j := i + 1
			for j < len(sel) && j < i+7 && isHex(sel[j]) {
				j++
			}
			if j > i+1 {
				if j < len(sel) && isSpace(sel[j]) {
					j++
				}
			} else if j < len(sel) {
				j++
			}
			comp.WriteString(sel[i:j])
			i = j - 1
		case quote != 0:
			comp.WriteByte(c)
			if c == quote {
				quote = 0
			}
		case bracket:
			comp.WriteByte(c)
			switch c {
			case ']':
				bracket = false
			case '"', '\'':
				quote = c
			}
		case c == '[':
			comp.WriteByte(c)
			bracket = true
		case c == ':':
			return nil, errPseudo
		case c == '~':
			return nil, errors.New("the ~ combinator is not allowed")
		case c == '(' || c == ')' || c == '"' || c == '\'':
			return nil, fmt.Errorf("%q: unexpected %q", sel, c)
		case c == ',':
			if err := endChain(); err != nil {
				return nil, err
			}
		case isSpace(c) || c == '>' || c == '+':
			if err := endCompound(); err != nil {
				return nil, err
			}
			if c == '>' || c == '+' {
				if pending == '>' || pending == '+' {
					return nil, fmt.Errorf("%q has two combinators in a row", sel)
				}
				pending = c
			} else if pending == 0 && len(cur.comps) > 0 {
				pending = ' '
			}
		default:
			comp.WriteByte(c)
		}
	}
	if quote != 0 || bracket {
		return nil, fmt.Errorf("%q: an attribute selector or a string is not closed", sel)
	}
	if err := endChain(); err != nil {
		return nil, err
	}
	return &s, nil
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// found reports whether any element of the tree under root matches s. The content of a
// <template> is not part of the page (the browser's querySelector does not see it either).
func (s *selector) found(root *html.Node) bool {
	for i := range s.alts {
		if s.alts[i].found(root) {
			return true
		}
	}
	return false
}

// found walks the tree once. For each element it computes the set of i such that comps[0..i]
// match a chain ending at the element; the chain matches where i is its last compound.
func (c *chain) found(root *html.Node) bool {
	last := uint64(1) << (len(c.comps) - 1)
	// walk visits the element children of n; anc is the union of the sets of n and its
	// ancestors, par the set of n.
	var walk func(n *html.Node, anc, par uint64) bool
	walk = func(n *html.Node, anc, par uint64) bool {
		var prev uint64 // the set of the previous element sibling
		for ch := n.FirstChild; ch != nil; ch = ch.NextSibling {
			if ch.Type != html.ElementNode {
				continue
			}
			var set uint64
			for i, comp := range c.comps {
				if i > 0 {
					bit := uint64(1) << (i - 1)
					var from uint64
					switch c.comb[i] {
					case ' ':
						from = anc
					case '>':
						from = par
					case '+':
						from = prev
					}
					if from&bit == 0 {
						continue
					}
				}
				if comp.Match(ch) {
					set |= 1 << i
				}
			}
			if set&last != 0 {
				return true
			}
			if ch.DataAtom == atom.Template && ch.Namespace == "" {
				prev = set
				continue
			}
			if walk(ch, anc|set, set) {
				return true
			}
			prev = set
		}
		return false
	}
	return walk(root, 0, 0)
}
