package wire

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Limits of POST /v1/targets.
const (
	// MaxTargetsBody bounds one POST /v1/targets request; a larger upload is answered 413 with
	// what landed before the limit, and is split by the client (freshqctl import does).
	MaxTargetsBody = 64 << 20
	// MaxTargetItem bounds one item of it, whitespace included. An item is decoded from a
	// buffer of at most this many bytes: a longer one is read to its end without being kept
	// and rejected by index, so a request never holds more than one bounded item.
	MaxTargetItem = 16 << 10
	maxItemDepth  = 32 // nesting inside one item
)

// TargetItem is one item of POST /v1/targets.
type TargetItem struct {
	URL      string          `json:"url"`
	Device   string          `json:"device,omitempty"`   // default "desktop"
	Interval json.RawMessage `json:"interval,omitempty"` // "6h", "7d", or seconds; default: keep, or resolve from routes
	Source   string          `json:"source,omitempty"`   // sitemap | discovered | api; default: keep, or api for a new target
	Due      string          `json:"due,omitempty"`      // RFC 3339; default: keep, or now for a new target
}

// TargetsResponse answers POST /v1/targets. It reports exactly what landed, whatever the
// status: Accepted items are committed, Rejected ones changed nothing, and when the body could
// not be read to its end (Error set: malformed JSON, over MaxTargetsBody) every item before
// StoppedAt was handled and none from it on. On a store failure (503) StoppedAt is the first
// item of the chunk the store failed: every valid item before it landed (Accepted, Merged),
// none from it on did; the items of that chunk found invalid before the write are counted in
// Rejected, the rest in neither, and nothing after the chunk was read.
type TargetsResponse struct {
	Accepted int `json:"accepted"`
	Rejected int `json:"rejected"`
	// Merged counts the accepted items whose key an earlier item of the same request also
	// named: each was merged over the one before it, in order (what it omits keeps the earlier
	// item's value), and they landed as one write.
	Merged    int         `json:"merged,omitempty"`
	Errors    []ItemError `json:"errors,omitempty"` // the first few, by item index
	Error     string      `json:"error,omitempty"`
	StoppedAt *int        `json:"stopped_at,omitempty"`
}

var errBadJSON = errors.New("bad JSON")

// BodyError is a body that stops being readable JSON at item Index: the items before it were
// handled, none from it on. Offset is the byte of the body where item Index begins, or, when
// the break is between items, the byte that breaks it.
type BodyError struct {
	Index  int
	Msg    string
	Offset int64
}

func (e *BodyError) Error() string { return fmt.Sprintf("bad JSON at item %d: %s", e.Index, e.Msg) }
func (e *BodyError) Unwrap() error { return errBadJSON }

// FieldError is an item that is JSON but not a valid target object, naming the field that made
// it so ("" when the item is not an object at all).
type FieldError struct {
	Field string
	Err   error
}

func (e *FieldError) Error() string { return e.Err.Error() }
func (e *FieldError) Unwrap() error { return e.Err }

// FieldOf is the field an error names (a *FieldError in its chain), or "".
func FieldOf(err error) string {
	var fe *FieldError
	if errors.As(err, &fe) {
		return fe.Field
	}
	return ""
}

// DecodeTargetItems streams the items of a JSON array, or of whitespace-separated JSON values
// (NDJSON, or one object however it is laid out), calling fn for each. Each item is held in a
// buffer of at most MaxTargetItem bytes: a longer one, one nested deeper than 32 levels, or
// one that is JSON but not a target object, is passed to fn with its error (a *FieldError
// when a field can be named), and the items after it are read on. A body whose structure
// breaks (between items, or a bracket within 32 levels that does not match) stops with a
// *BodyError naming the index of the item it could not read; so does anything after an
// array's closing bracket. Errors of r (such as *http.MaxBytesError) are returned as they are.
func DecodeTargetItems(r io.Reader, fn func(i int, item *TargetItem, err error) error) error {
	return DecodeTargetItemsAt(r, func(i int, _ int64, item *TargetItem, err error) error { return fn(i, item, err) })
}

// DecodeTargetItemsAt is DecodeTargetItems that also passes fn the byte offset in r where each
// item begins, so that a reader of a file can name an item by its line.
func DecodeTargetItemsAt(r io.Reader, fn func(i int, off int64, item *TargetItem, err error) error) error {
	cr := &byteCounter{r: r}
	sc := &itemScanner{br: bufio.NewReaderSize(cr, 64<<10), cr: cr}
	first, err := sc.skipSpace()
	if err == io.EOF {
		return &BodyError{Index: 0, Msg: "empty body"}
	}
	if err != nil {
		return err
	}
	item := func(i int) error {
		off := sc.pos()
		raw, long, deep, err := sc.value()
		if err != nil {
			return sc.fail(i, off, err)
		}
		if deep {
			return fn(i, off, nil, fmt.Errorf("item nested deeper than %d levels", maxItemDepth))
		}
		if long {
			return fn(i, off, nil, fmt.Errorf("item over %d bytes", MaxTargetItem))
		}
		it, err := decodeItem(raw)
		return fn(i, off, it, err)
	}
	if first != '[' {
		for i := 0; ; i++ {
			if _, err := sc.skipSpace(); err == io.EOF {
				return nil
			} else if err != nil {
				return err
			}
			if err := item(i); err != nil {
				return err
			}
		}
	}
	sc.br.ReadByte()
	if c, err := sc.skipSpace(); err != nil {
		return sc.fail(0, sc.pos(), err)
	} else if c == ']' {
		sc.br.ReadByte()
		return sc.end(0)
	}
	for i := 0; ; i++ {
		if err := item(i); err != nil {
			return err
		}
		c, err := sc.skipSpace()
		if err != nil {
			return sc.fail(i+1, sc.pos(), err)
		}
		at := sc.pos()
		sc.br.ReadByte()
		switch c {
		case ']':
			return sc.end(i + 1)
		case ',':
			if _, err := sc.skipSpace(); err != nil {
				return sc.fail(i+1, sc.pos(), err)
			}
		default:
			return &BodyError{Index: i + 1, Offset: at, Msg: fmt.Sprintf("expected , or ] after item %d, found %q", i, c)}
		}
	}
}

// itemScanner splits a body into JSON values without decoding them: it tracks strings and
// brackets only, keeps at most MaxTargetItem bytes of a value, and leaves the grammar inside
// one item to encoding/json.
type itemScanner struct {
	br  *bufio.Reader
	cr  *byteCounter // beneath br
	buf []byte
}

// byteCounter counts the bytes read through it.
type byteCounter struct {
	r io.Reader
	n int64
}

func (c *byteCounter) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n += int64(n)
	return n, err
}

// pos is the offset of the next byte the scanner will read.
func (sc *itemScanner) pos() int64 { return sc.cr.n - int64(sc.br.Buffered()) }

var errTruncated = errors.New("truncated: the body ends inside an item")

// fail turns a scan error at item i, which begins at byte off, into a BodyError, leaving the
// reader's own errors as they are.
func (sc *itemScanner) fail(i int, off int64, err error) error {
	var bad *BodyError
	switch {
	case err == io.EOF || errors.Is(err, errTruncated):
		return &BodyError{Index: i, Offset: off, Msg: errTruncated.Error()}
	case errors.As(err, &bad):
		bad.Index, bad.Offset = i, off
		return bad
	}
	return err
}

// end checks that only whitespace follows an array's closing bracket; items is the count read.
func (sc *itemScanner) end(items int) error {
	c, err := sc.skipSpace()
	if err == io.EOF {
		return nil
	}
	if err != nil {
		return err
	}
	return &BodyError{Index: items, Offset: sc.pos(), Msg: fmt.Sprintf("%q after the closing ]", c)}
}

// skipSpace consumes whitespace and peeks at the next byte.
func (sc *itemScanner) skipSpace() (byte, error) {
	for {
		b, err := sc.br.ReadByte()
		if err != nil {
			return 0, err
		}
		if b != ' ' && b != '\t' && b != '\r' && b != '\n' {
			return b, sc.br.UnreadByte()
		}
	}
}

func (sc *itemScanner) keep(b byte, long *bool) {
	if len(sc.buf) < MaxTargetItem {
		sc.buf = append(sc.buf, b)
	} else {
		*long = true
	}
}

func scalarByte(b byte) bool {
	return b >= 'a' && b <= 'z' || b >= 'A' && b <= 'Z' || b >= '0' && b <= '9' || b == '-' || b == '+' || b == '.'
}

// value reads one JSON value: an object, an array, a string, or a scalar (number, true, false,
// null, or any run of letters, which encoding/json will refuse as an item). A value nested
// deeper than maxItemDepth is read to its end and reported deep, to be rejected alone: its
// brackets past that depth are counted, not matched, which finds its end all the same (only
// their count decides where it ends), and it is refused whatever they are. Brackets within
// maxItemDepth are matched, and a mismatch there stops the body.
func (sc *itemScanner) value() (raw []byte, long, deep bool, err error) {
	sc.buf = sc.buf[:0]
	b, err := sc.br.ReadByte()
	if err != nil {
		return nil, false, false, err
	}
	if scalarByte(b) {
		for scalarByte(b) {
			sc.keep(b, &long)
			if b, err = sc.br.ReadByte(); err == io.EOF {
				return sc.buf, long, false, nil
			} else if err != nil {
				return nil, false, false, err
			}
		}
		return sc.buf, long, false, sc.br.UnreadByte()
	}
	var stack [maxItemDepth]byte
	depth, inStr, esc := 0, false, false
	for {
		sc.keep(b, &long)
		switch {
		case inStr:
			switch {
			case esc:
				esc = false
			case b == '\\':
				esc = true
			case b == '"':
				inStr = false
			}
		case b == '"':
			inStr = true
		case b == '{' || b == '[':
			if depth < maxItemDepth {
				stack[depth] = b + 2 // '{'+2 == '}', '['+2 == ']'
			} else {
				deep = true
			}
			depth++
		case b == '}' || b == ']':
			if depth == 0 || depth <= maxItemDepth && stack[depth-1] != b {
				return nil, false, false, &BodyError{Msg: fmt.Sprintf("unexpected %q", b)}
			}
			depth--
		case depth == 0:
			return nil, false, false, &BodyError{Msg: fmt.Sprintf("unexpected %q", b)}
		}
		if depth == 0 && !inStr {
			return sc.buf, long, deep, nil
		}
		if b, err = sc.br.ReadByte(); err != nil {
			if err == io.EOF {
				err = errTruncated
			}
			return nil, false, false, err
		}
	}
}

// decodeItem decodes one bounded item, naming the field that makes it invalid.
func decodeItem(raw []byte) (*TargetItem, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.DisallowUnknownFields()
	var it TargetItem
	if err := dec.Decode(&it); err != nil {
		field := JSONErrorField(err)
		if field == "" {
			return nil, &FieldError{Err: fmt.Errorf("not a target object: %v", err)}
		}
		return nil, &FieldError{Field: field, Err: fmt.Errorf("not a target object: %v", err)}
	}
	if dec.More() {
		return nil, &FieldError{Err: errors.New("not a target object: more than one value")}
	}
	return &it, nil
}

// JSONErrorField is the field encoding/json blames in err: the path of a value of the wrong
// type, or the name of an unknown field; "" when it names none.
func JSONErrorField(err error) string {
	var typeErr *json.UnmarshalTypeError
	if errors.As(err, &typeErr) {
		return typeErr.Field
	}
	if name, ok := strings.CutPrefix(err.Error(), "json: unknown field "); ok {
		field, _ := strconv.Unquote(name)
		return field
	}
	return ""
}
