package yamlfile

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/goccy/go-yaml/ast"
)

// Line finds the line of the YAML key at a dotted path such as queue.lease_ttl,
// routes[2].match or render.devices.tv.big.width in a parsed file, or of its nearest parent
// the file sets, or 0.
//
// It walks the file's nodes itself rather than through a YAML path expression for two reasons:
// the line it gives is the key's own (a nested block's value starts on the next line, and an
// error there would point past its key), and a map key may hold dots (a device named tv.big),
// which a path expression would split. At each mapping the longest key that the rest of the
// path continues with wins.
func Line(file *ast.File, path string) int {
	if file == nil || len(file.Docs) == 0 {
		return 0
	}
	node, line, rest := file.Docs[0].Body, 0, path
	for rest != "" && node != nil {
		node = unwrapNode(node)
		if strings.HasPrefix(rest, "[") {
			end := strings.IndexByte(rest, ']')
			seq, ok := node.(*ast.SequenceNode)
			if end < 0 || !ok {
				break
			}
			i, err := strconv.Atoi(rest[1:end])
			if err != nil || i < 0 || i >= len(seq.Values) {
				break
			}
			node = seq.Values[i]
			line = node.GetToken().Position.Line
			rest = strings.TrimPrefix(rest[end+1:], ".")
			continue
		}
		var best *ast.MappingValueNode
		for _, mv := range mappingValues(node) {
			k := KeyText(mv.Key)
			continues := rest == k || strings.HasPrefix(rest, k+".") || strings.HasPrefix(rest, k+"[")
			if continues && (best == nil || len(k) > len(KeyText(best.Key))) {
				best = mv
			}
		}
		if best == nil {
			break
		}
		line = best.Key.GetToken().Position.Line
		node = best.Value
		rest = strings.TrimPrefix(rest[len(KeyText(best.Key)):], ".")
	}
	return line
}

func unwrapNode(n ast.Node) ast.Node {
	for {
		switch v := n.(type) {
		case *ast.TagNode:
			n = v.Value
		case *ast.AnchorNode:
			n = v.Value
		default:
			return n
		}
	}
}

func mappingValues(n ast.Node) []*ast.MappingValueNode {
	switch v := n.(type) {
	case *ast.MappingNode:
		return v.Values
	case *ast.MappingValueNode:
		return []*ast.MappingValueNode{v}
	}
	return nil
}

// KeyText is a mapping key as the dotted paths name it.
func KeyText(k ast.MapKeyNode) string {
	if s, ok := k.(ast.ScalarNode); ok {
		return fmt.Sprint(s.GetValue())
	}
	return k.GetToken().Value
}
