package pagedigest

import "bytes"

// The built-in rules are hand-written scanners, not regular expressions: each finds its
// candidates with a vectorised byte search (bytes.Index, IndexByte) and checks a few bytes
// around them, where Go's regexp would run its automaton over every byte (measured: 4 MB/s
// per rule against hundreds here, BenchmarkDigest).

// finder returns the next span [start, end) at or after from to replace by repl, or ok false.
type finder func(b []byte, from int) (start, end int, repl string, ok bool)

// rewrite applies f across b, returning b itself when nothing matches.
func rewrite(b []byte, f finder) []byte {
	var out []byte
	last, from := 0, 0
	for from <= len(b) {
		s, e, repl, ok := f(b, from)
		if !ok {
			break
		}
		if s < last || e < s || e > len(b) {
			// A span overlapping the one replaced before it (a finder may look behind from).
			from = max(from+1, s+1)
			continue
		}
		if out == nil {
			out = make([]byte, 0, len(b))
		}
		out = append(append(out, b[last:s]...), repl...)
		last, from = e, max(e, s+1)
	}
	if out == nil {
		return b
	}
	return append(out, b[last:]...)
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' }
func isDigit(c byte) bool { return c >= '0' && c <= '9' }
func isHex(c byte) bool   { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'f') }
func isAlnum(c byte) bool { return isDigit(c) || (c|0x20 >= 'a' && c|0x20 <= 'z') }

// attrValueEnd returns where an attribute value starting at i ends: after its closing quote,
// or at the first space or '>' when unquoted.
func attrValueEnd(b []byte, i int) int {
	if i < len(b) && (b[i] == '"' || b[i] == '\'') {
		if j := bytes.IndexByte(b[i+1:], b[i]); j >= 0 {
			return i + 1 + j + 1
		}
		return len(b)
	}
	for i < len(b) && !isSpace(b[i]) && b[i] != '>' {
		i++
	}
	return i
}

var nonceAttr = []byte("nonce=")

// findNonce: a nonce attribute (CSP nonces of script and style elements), with the space
// before it.
func findNonce(b []byte, from int) (int, int, string, bool) {
	for from < len(b) {
		i := bytes.Index(b[from:], nonceAttr)
		if i < 0 {
			return 0, 0, "", false
		}
		i += from
		if i > 0 && isSpace(b[i-1]) {
			return i - 1, attrValueEnd(b, i+len(nonceAttr)), "", true
		}
		from = i + 1
	}
	return 0, 0, "", false
}

var csrfMarkers = [][]byte{[]byte("csrf"), []byte("CSRF"), []byte("xsrf"), []byte("XSRF"),
	[]byte("authenticity_token"), []byte("RequestVerificationToken"), []byte("_token")}

// findCSRF: a meta or input element that names a CSRF token (its name or id says so) is
// replaced whole, token included.
func findCSRF(b []byte, from int) (int, int, string, bool) {
	best, bestEnd := -1, -1
	for _, m := range csrfMarkers {
		at := from
		for at < len(b) {
			i := bytes.Index(b[at:], m)
			if i < 0 {
				break
			}
			i += at
			if s, e, ok := enclosingTag(b, i); ok && s >= from && (best < 0 || s < best) {
				best, bestEnd = s, e
				break
			}
			at = i + 1
			if best >= 0 && at > best {
				break
			}
		}
	}
	if best < 0 {
		return 0, 0, "", false
	}
	return best, bestEnd, "<csrf>", true
}

// enclosingTag returns the meta or input start tag around i, if i is inside one.
func enclosingTag(b []byte, i int) (int, int, bool) {
	s := bytes.LastIndexByte(b[:i], '<')
	if s < 0 || bytes.IndexByte(b[s:i], '>') >= 0 {
		return 0, 0, false
	}
	name := b[s+1:]
	if !(hasPrefixFold(name, "meta") || hasPrefixFold(name, "input")) {
		return 0, 0, false
	}
	e := bytes.IndexByte(b[i:], '>')
	if e < 0 {
		return 0, 0, false
	}
	return s, i + e + 1, true
}

func hasPrefixFold(b []byte, lower string) bool {
	if len(b) <= len(lower) {
		return false
	}
	for k := range len(lower) {
		if b[k]|0x20 != lower[k] {
			return false
		}
	}
	return !isAlnum(b[len(lower)])
}

// findTime: an ISO 8601 date-time, 2026-12-02T09:00 with optional seconds, fraction and zone.
func findTime(b []byte, from int) (int, int, string, bool) {
	for from < len(b) {
		i := bytes.IndexByte(b[from:], '-')
		if i < 0 {
			return 0, 0, "", false
		}
		i += from
		if e, ok := timeAt(b, i-4); ok {
			return i - 4, e, "<time>", true
		}
		from = i + 1
	}
	return 0, 0, "", false
}

// timeAt reports whether a date-time starts at s, and where it ends.
func timeAt(b []byte, s int) (int, bool) {
	if s < 0 || s+16 > len(b) {
		return 0, false
	}
	digits := func(at, n int) bool {
		for k := range n {
			if at+k >= len(b) || !isDigit(b[at+k]) {
				return false
			}
		}
		return true
	}
	if !digits(s, 4) || b[s+4] != '-' || !digits(s+5, 2) || b[s+7] != '-' || !digits(s+8, 2) ||
		(b[s+10] != 'T' && b[s+10] != ' ') || !digits(s+11, 2) || b[s+13] != ':' || !digits(s+14, 2) {
		return 0, false
	}
	e := s + 16
	if e+2 < len(b) && b[e] == ':' && digits(e+1, 2) {
		e += 3
		if e+1 < len(b) && b[e] == '.' && isDigit(b[e+1]) {
			e++
			for e < len(b) && isDigit(b[e]) {
				e++
			}
		}
	}
	switch {
	case e < len(b) && b[e] == 'Z':
		e++
	case e+2 < len(b) && (b[e] == '+' || b[e] == '-') && digits(e+1, 2):
		z := e + 3
		if z < len(b) && b[z] == ':' {
			z++
		}
		if digits(z, 2) {
			e = z + 2
		}
	}
	return e, true
}

// assetExts are the file extensions of assets whose URLs carry cache-busters.
var assetExts = []string{"js", "mjs", "css", "png", "jpg", "jpeg", "gif", "svg", "webp", "avif",
	"woff", "woff2", "ttf", "otf", "eot", "ico", "map"}

// assetExtBefore reports whether b[:i] ends with "." and an asset extension, and where that
// "." is.
func assetExtBefore(b []byte, i int) (int, bool) {
	j := i
	for j > 0 && j > i-6 && isAlnum(b[j-1]) {
		j--
	}
	if j == 0 || b[j-1] != '.' || j == i {
		return 0, false
	}
	if !isAssetExt(b[j:i]) {
		return 0, false
	}
	return j - 1, true
}

func isAssetExt(w []byte) bool {
	for _, x := range assetExts {
		if len(w) == len(x) {
			ok := true
			for k := range w {
				if w[k]|0x20 != x[k] {
					ok = false
					break
				}
			}
			if ok {
				return true
			}
		}
	}
	return false
}

// findAssetQuery: the query string of an asset URL (app.js?v=123), up to a quote, space, '>'
// or ')'.
func findAssetQuery(b []byte, from int) (int, int, string, bool) {
	for from < len(b) {
		i := bytes.IndexByte(b[from:], '?')
		if i < 0 {
			return 0, 0, "", false
		}
		i += from
		if _, ok := assetExtBefore(b, i); ok {
			e := i + 1
			for e < len(b) && b[e] != '"' && b[e] != '\'' && !isSpace(b[e]) && b[e] != '>' && b[e] != ')' {
				e++
			}
			return i, e, "", true
		}
		from = i + 1
	}
	return 0, 0, "", false
}

// findAssetHash: a content-hash segment of an asset's file name, 8 or more hex digits after
// a "." or "-" (app.3f2a1b9c.js, main-3f2a1b9c.css).
func findAssetHash(b []byte, from int) (int, int, string, bool) {
	for from < len(b) {
		i := bytes.IndexByte(b[from:], '.')
		if i < 0 {
			return 0, 0, "", false
		}
		i += from
		// the extension after this '.', ending at a non-alphanumeric byte
		e := i + 1
		for e < len(b) && e <= i+6 && isAlnum(b[e]) {
			e++
		}
		if e > i+1 && (e == len(b) || !isAlnum(b[e])) && isAssetExt(b[i+1:e]) {
			h := i
			for h > 0 && isHex(b[h-1]) {
				h--
			}
			if i-h >= 8 && h > 0 && (b[h-1] == '.' || b[h-1] == '-') {
				return h - 1, i, "", true
			}
		}
		from = i + 1
	}
	return 0, 0, "", false
}
