package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"

	"github.com/freshq/freshq/apply"
	"github.com/freshq/freshq/wire"
)

// resultsHandler applies a batch of results: the internal endpoint for render workers and
// POST /v1/results for remote renderers are the same operation. With binaryOK, a body of
// Content-Type ResultsContentType is a binary batch (package wire); any other body is JSON.
// apply.Applier.Deliver says what the batch did; status maps its errors: 413 for a body over
// MaxResultsBody; 400 naming the field for a batch that does not decode or holds a bad result,
// and then nothing of the batch is applied; 503 when the store fails, nothing applied (retry);
// 409 naming results[i].lease when every result was fenced (its body also carries the
// ApplyStats); otherwise 200 with the ApplyStats, which count what was applied, skipped and
// fenced.
func resultsHandler(a *apply.Applier, limit *Limiter, binaryOK bool) http.HandlerFunc {
	return limit.Wrap(wire.MaxResultsBody, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		results, err := readResults(w, r, binaryOK)
		if err != nil {
			fail(w, err)
			return
		}
		st, err := a.Deliver(results)
		if err != nil {
			fail(w, err)
			return
		}
		ok(w, st)
	})).ServeHTTP
}

// readResults reads and decodes a results body. The body is read whole into one buffer of its
// Content-Length; the binary form is decoded in place, and JSON is first scanned without
// allocating (count and field names) and then decoded by encoding/json from that buffer, so a
// request costs about its body plus its decoded pages.
func readResults(w http.ResponseWriter, r *http.Request, binaryOK bool) ([]wire.Result, error) {
	body, err := readBody(w, r, wire.MaxResultsBody)
	if err != nil {
		return nil, err
	}
	if binaryOK && r.Header.Get("Content-Type") == wire.ResultsContentType {
		rs, err := wire.DecodeResults(body)
		if err != nil {
			return nil, &badBatch{field: cmp.Or(wire.FieldOf(err), "results"), err: err}
		}
		return rs, nil
	}
	if field, err := scanResultsJSON(body); err != nil {
		return nil, &wire.FieldError{Field: field, Err: err}
	}
	var req wire.ResultsRequest
	if err := json.Unmarshal(body, &req); err != nil {
		return nil, &badJSON{err: err}
	}
	return req.Results, nil
}

// readBody reads a size-limited body whole. A body that declares a length over limit is
// refused before any of it is read; one of a declared length is read into one buffer of that
// size. One of unknown length is read in chunks that are never copied while it arrives, so
// refusing one past limit holds about the limit, and accepting one holds it twice for the
// moment its chunks are joined.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	if r.ContentLength > limit {
		return nil, &declaredTooBig{length: r.ContentLength, limit: limit}
	}
	body, err := readCapped(http.MaxBytesReader(w, r.Body, limit), r.ContentLength, int(limit))
	if err != nil {
		return nil, bodyError(err)
	}
	return body, nil
}

// Chunks of a body of unknown length: the first small, so that a small body costs little,
// then doubling up to the largest, so that a large one is a few dozen allocations.
const (
	firstBodyChunk = 64 << 10
	maxBodyChunk   = 4 << 20
)

// readCapped reads r to its end. With a known length it reads into one buffer of length+1
// bytes (the extra byte sees EOF without growing). Without, it fills chunks and joins them
// once at EOF: a buffer grown by doubling would leave every smaller copy behind as garbage,
// and a body refused at the limit would have cost nearly twice the limit. r must fail past
// limit bytes (http.MaxBytesReader).
func readCapped(r io.Reader, length int64, limit int) ([]byte, error) {
	if length >= 0 {
		b := make([]byte, 0, min(int(length)+1, limit+1))
		for {
			if len(b) == cap(b) {
				return nil, &http.MaxBytesError{Limit: int64(limit)}
			}
			n, err := r.Read(b[len(b):cap(b)])
			b = b[:len(b)+n]
			if err == io.EOF {
				return b, nil
			}
			if err != nil {
				return nil, err
			}
		}
	}
	var chunks [][]byte
	total := 0
	for size := firstBodyChunk; ; size = min(2*size, maxBodyChunk) {
		c := make([]byte, size)
		n, err := io.ReadFull(r, c)
		total += n
		if n > 0 {
			chunks = append(chunks, c[:n])
		}
		if err == io.EOF || err == io.ErrUnexpectedEOF {
			break
		}
		if err != nil {
			return nil, err
		}
	}
	if len(chunks) == 1 {
		return chunks[0], nil
	}
	b := make([]byte, 0, total)
	for i, c := range chunks {
		b = append(b, c...)
		chunks[i] = nil
	}
	return b, nil
}

// JSON field names of a results request, for scanResultsJSON.
var (
	resultsTopFields   = []string{"results"}
	resultsFields      = []string{"key", "outcome", "status", "stage", "duration_ms", "headers", "body", "err", "lease"}
	resultsLeaseFields = []string{"slot", "state", "key_hash"}
)

// scanResultsJSON walks a JSON results request without allocating, before encoding/json
// decodes it: it counts the results (at most MaxResults) and the headers of each (at most
// MaxResultHeaders), because decoding either costs much more than its smallest JSON, and
// refuses an unknown field, naming it, as the other endpoints do. It judges only what it looks
// at; json.Unmarshal refuses malformed JSON.
func scanResultsJSON(b []byte) (field string, err error) {
	type frame struct {
		known  []string // the field names of this object; nil: any (headers) or not checked
		kind   byte     // 't' the request, 'r' the results array, 'e' a result, 'l' its lease, 'h' its headers
		array  bool
		commas int // of an array: elements so far - 1
	}
	var stack [64]frame
	depth := 0
	expectKey := false
	var lastKey []byte
	resultIndex := func() int {
		for d := depth - 1; d >= 0; d-- {
			if stack[d].kind == 'r' {
				return stack[d].commas
			}
		}
		return 0
	}
	for i := 0; i < len(b); i++ {
		switch c := b[i]; c {
		case '"':
			end := i + 1
			for end < len(b) && b[end] != '"' {
				if b[end] == '\\' {
					end++
				}
				end++
			}
			if end >= len(b) {
				return "", errors.New("bad JSON: unterminated string")
			}
			if depth > 0 && !stack[depth-1].array && expectKey {
				lastKey = b[i+1 : end]
				if fr := &stack[depth-1]; fr.known != nil && !knownField(fr.known, lastKey) {
					name := fmt.Sprintf("%.64s", lastKey)
					switch fr.kind {
					case 'e':
						name = fmt.Sprintf("results[%d].%s", resultIndex(), name)
					case 'l':
						name = fmt.Sprintf("results[%d].lease.%s", resultIndex(), name)
					}
					return name, fmt.Errorf("unknown field %q", name)
				}
				expectKey = false
			}
			i = end
		case '{', '[':
			if depth == len(stack) {
				return "", errors.New("bad JSON: nested too deeply")
			}
			fr := frame{array: c == '['}
			switch {
			case depth == 0 && c == '{':
				fr.kind, fr.known = 't', resultsTopFields
			case depth == 0:
			case stack[depth-1].kind == 't' && c == '[' && bytes.EqualFold(lastKey, []byte("results")):
				fr.kind = 'r'
			case stack[depth-1].kind == 'r' && c == '{':
				fr.kind, fr.known = 'e', resultsFields
			case stack[depth-1].kind == 'e' && c == '{' && bytes.EqualFold(lastKey, []byte("lease")):
				fr.kind, fr.known = 'l', resultsLeaseFields
			case stack[depth-1].kind == 'e' && c == '{' && bytes.EqualFold(lastKey, []byte("headers")):
				fr.kind = 'h'
			}
			stack[depth] = fr
			depth++
			expectKey = c == '{'
		case '}', ']':
			depth = max(0, depth-1)
			expectKey = false
		case ',':
			switch {
			case depth == 0:
			case stack[depth-1].kind == 'h':
				expectKey = true
				if stack[depth-1].commas++; stack[depth-1].commas >= wire.MaxResultHeaders {
					name := fmt.Sprintf("results[%d].headers", resultIndex())
					return name, fmt.Errorf("over %d headers; a result carries at most %d", wire.MaxResultHeaders, wire.MaxResultHeaders)
				}
			case !stack[depth-1].array:
				expectKey = true
			case stack[depth-1].kind == 'r':
				if stack[depth-1].commas++; stack[depth-1].commas >= wire.MaxResults {
					return "results", fmt.Errorf("over %d results; at most %d a request", wire.MaxResults, wire.MaxResults)
				}
			}
		}
	}
	return "", nil
}

func knownField(known []string, name []byte) bool {
	for _, k := range known {
		if bytes.EqualFold([]byte(k), name) {
			return true
		}
	}
	return false
}
