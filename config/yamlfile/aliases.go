package yamlfile

import (
	"context"
	"fmt"
	"strconv"

	"github.com/goccy/go-yaml/ast"
)

// MaxAliasNodes bounds what aliases and merge keys may stand for in one file: the YAML nodes
// every alias (*name, and <<: *name) would expand to, summed over the file. The YAML decoder
// expands each alias in full, so ten levels of ten aliases each, 600 bytes, stand for 10¹⁰
// nodes and take gigabytes; and it decodes a merge list once per reference, so thirty anchors
// each merging the one before twice stand for 2³⁰. A configuration that shares a block of
// devices or headers between a few routes stands for a few hundred.
const MaxAliasNodes = 10_000

// BoundAliases walks the parsed file in document order, as the decoder resolves anchors, and
// refuses it once its aliases stand for more than MaxAliasNodes nodes, naming the line and
// path of the alias that crossed the bound. An alias to an anchor not defined above it is
// refused too: the decoder would fail on it, and counting it as nothing would let it through
// unbounded should the decoder ever resolve it. It reads the AST only, never expanding an alias,
// so its work and memory are linear in the file; it checks ctx as it goes and returns ctx's
// error as it is once ctx is done. A refusal is a *Refusal.
func BoundAliases(ctx context.Context, file *ast.File) error {
	b := aliasBound{ctx: ctx, anchors: map[string]int{}}
	for _, doc := range file.Docs {
		if _, err := b.size(doc.Body, ""); err != nil {
			return err
		}
	}
	return nil
}

type aliasBound struct {
	ctx      context.Context
	anchors  map[string]int // anchor name → the nodes it stands for, as last defined above
	expanded int            // nodes the aliases seen so far stand for
	visited  int
}

// size is the number of nodes n stands for once every alias in it is expanded. Each size is
// bounded by the nodes walked plus MaxAliasNodes, so it cannot overflow.
func (b *aliasBound) size(n ast.Node, path string) (int, error) {
	if n == nil {
		return 0, nil
	}
	if b.visited++; b.visited%1024 == 0 {
		if err := b.ctx.Err(); err != nil {
			return 0, err
		}
	}
	switch v := n.(type) {
	case *ast.DocumentNode:
		return b.size(v.Body, path)
	case *ast.TagNode:
		return b.size(v.Value, path)
	case *ast.MappingKeyNode:
		return b.size(v.Value, path)
	case *ast.AnchorNode:
		s, err := b.size(v.Value, path)
		if err != nil {
			return 0, err
		}
		b.anchors[v.Name.GetToken().Value] = s
		return s, nil
	case *ast.AliasNode:
		name := v.Value.GetToken().Value
		s, ok := b.anchors[name]
		if !ok {
			return 0, b.refuse(v, path, fmt.Sprintf("alias *%s names no anchor defined above it", name))
		}
		if b.expanded += s; b.expanded > MaxAliasNodes {
			return 0, b.refuse(v, path, fmt.Sprintf("aliases and merge keys stand for more than %d YAML nodes; write the values out", MaxAliasNodes))
		}
		return s, nil
	case *ast.MappingNode:
		total := 1
		for _, mv := range v.Values {
			s, err := b.size(mv, path)
			if err != nil {
				return 0, err
			}
			total += s
		}
		return total, nil
	case *ast.MappingValueNode:
		child := KeyText(v.Key)
		if path != "" {
			child = path + "." + child
		}
		k, err := b.size(v.Key, path)
		if err != nil {
			return 0, err
		}
		s, err := b.size(v.Value, child)
		if err != nil {
			return 0, err
		}
		return k + s, nil
	case *ast.SequenceNode:
		total := 1
		for i, e := range v.Values {
			s, err := b.size(e, path+"["+strconv.Itoa(i)+"]")
			if err != nil {
				return 0, err
			}
			total += s
		}
		return total, nil
	}
	return 1, nil // a scalar, a comment, a directive: no alias inside
}

func (b *aliasBound) refuse(alias *ast.AliasNode, path, msg string) error {
	if path == "" {
		path = "body"
	}
	return &Refusal{Path: path, Line: alias.GetToken().Position.Line, Msg: msg}
}

// Refusal is a file refused at an alias: the dotted path of the key it sits under, its line,
// and why.
type Refusal struct {
	Path string
	Line int
	Msg  string
}

func (r *Refusal) Error() string { return fmt.Sprintf("%s: line %d: %s", r.Path, r.Line, r.Msg) }
