package yamlfile

import (
	"bytes"
	"fmt"
)

// MaxNestingDepth bounds how deeply a configuration file's collections nest: block mappings
// and sequences (by indentation, and each "- " of a compact nested sequence) and flow ones
// ([ and {) together. freshq's deepest key is some six levels down; the YAML parser's and
// decoder's cost grows faster than a file's size with its depth (a megabyte of "- [[[…]]]"
// lines 2,000 deep took seconds and gigabytes), so a deeper file is refused before any parse.
const MaxNestingDepth = 64

// BoundDepth scans data once, without parsing it, for collections nested deeper than
// MaxNestingDepth, and refuses the file with the line where the bound is passed. The scan
// errs towards depth: a plain scalar holding brackets (a regular expression not quoted) may
// count, which only matters 64 levels deep. Quoted scalars, comments and block scalars'
// content (after | or >) do not count. The error names the line only: the caller says what
// file was refused.
func BoundDepth(data []byte) error {
	var (
		levels     []int // block levels' columns
		flow       int   // open flow collections
		flowBase   int   // block depth where the open flow collection started
		quote      byte  // the open quote spanning lines, or 0
		blockInd   = -1  // a block scalar's parent indentation: deeper lines are its content
		line       = 0
		lineStart  = 0
		exceededAt = 0
	)
	for lineStart <= len(data) && exceededAt == 0 {
		end := bytes.IndexByte(data[lineStart:], '\n')
		if end < 0 {
			end = len(data) - lineStart
		}
		l := data[lineStart : lineStart+end]
		lineStart += end + 1
		line++
		indent := 0
		for indent < len(l) && l[indent] == ' ' {
			indent++
		}
		blank := indent == len(l) || l[indent] == '#' || l[indent] == '\r'
		if blockInd >= 0 {
			if blank || indent > blockInd {
				continue
			}
			blockInd = -1
		}
		i := 0
		if flow == 0 && quote == 0 {
			if blank {
				continue
			}
			for len(levels) > 0 && levels[len(levels)-1] >= indent {
				levels = levels[:len(levels)-1]
			}
			levels = append(levels, indent)
			i = indent
			// Each "- " of a compact nested sequence is a level of its own.
			for i < len(l) && l[i] == '-' && (i+1 == len(l) || l[i+1] == ' ') {
				i++
				for i < len(l) && l[i] == ' ' {
					i++
				}
				if i < len(l) {
					levels = append(levels, i)
				}
			}
			if len(levels) > MaxNestingDepth {
				exceededAt = line
				break
			}
			flowBase = len(levels)
		}
		valueStart := true // at a place where a flow collection may open
		for ; i < len(l); i++ {
			c := l[i]
			if quote != 0 {
				switch {
				case c == '\\' && quote == '"':
					i++
				case c == '\'' && quote == '\'' && i+1 < len(l) && l[i+1] == '\'':
					i++
				case c == quote:
					quote = 0
				}
				continue
			}
			switch {
			case c == '#' && (i == 0 || l[i-1] == ' ' || l[i-1] == '\t'):
				i = len(l)
			case (c == '"' || c == '\'') && valueStart:
				quote = c
			case (c == '[' || c == '{') && (valueStart || flow > 0):
				flow++
				if flowBase+flow > MaxNestingDepth {
					exceededAt = line
					i = len(l)
				}
			case (c == ']' || c == '}') && flow > 0:
				flow--
			case (c == '|' || c == '>') && valueStart && flow == 0 && blockHeader(l[i+1:]):
				blockInd = indent
				i = len(l)
			}
			switch c {
			case ' ', '\t', '[', '{', ',', ':', '-', '?':
				valueStart = true
			default:
				valueStart = false
			}
		}
	}
	if exceededAt > 0 {
		return fmt.Errorf("line %d: collections nest deeper than %d levels", exceededAt, MaxNestingDepth)
	}
	return nil
}

// blockHeader reports whether rest, what follows a | or > on its line, makes it a block
// scalar's header: chomping and indentation indicators only, then nothing but a comment.
func blockHeader(rest []byte) bool {
	i := 0
	for i < len(rest) && (rest[i] == '-' || rest[i] == '+' || rest[i] >= '0' && rest[i] <= '9') {
		i++
	}
	rest = bytes.TrimLeft(rest[i:], " \t\r")
	return len(rest) == 0 || rest[0] == '#'
}
