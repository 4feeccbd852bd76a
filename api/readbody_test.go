package api

import (
	"bytes"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"runtime"
	"testing"
)

// TestReadCappedKeepsEveryByte reads bodies of known and unknown length across the chunk
// boundaries and checks each comes back byte for byte.
func TestReadCappedKeepsEveryByte(t *testing.T) {
	const limit = 12 << 20
	for _, n := range []int{0, 1, firstBodyChunk - 1, firstBodyChunk, firstBodyChunk + 1, 3*firstBodyChunk + 7, maxBodyChunk + 3, limit} {
		want := make([]byte, n)
		for i := range want {
			want[i] = byte(i*7 + i>>13)
		}
		for _, known := range []bool{true, false} {
			length := int64(-1)
			if known {
				length = int64(n)
			}
			// iotest-like: a reader that hands out odd-sized pieces, as a network does.
			got, err := readCapped(&piecewise{b: want, step: 1000 + n%3}, length, limit)
			if err != nil {
				t.Fatalf("%d bytes (known %v): %v", n, known, err)
			}
			if !bytes.Equal(got, want) {
				t.Fatalf("%d bytes (known %v): got %d bytes, not the body", n, known, len(got))
			}
		}
	}
}

// TestReadCappedRefusesPastTheLimitHoldingAboutTheLimit: a body of unknown length that runs
// past the limit is refused, and reading it allocated about the limit, not the ~2× a buffer
// grown by doubling leaves behind.
func TestReadCappedRefusesPastTheLimitHoldingAboutTheLimit(t *testing.T) {
	const limit = 24 << 20
	body := &repeat{n: 32 << 20}
	rec := httptest.NewRecorder()
	r := httptest.NewRequest(http.MethodPost, "/", io.NopCloser(body))
	r.ContentLength = -1
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_, err := readCapped(http.MaxBytesReader(rec, r.Body, limit), -1, limit)
	runtime.ReadMemStats(&after)
	var tooBig *http.MaxBytesError
	if !errors.As(err, &tooBig) {
		t.Fatalf("a body past the limit: %v, want a MaxBytesError", err)
	}
	allocated := after.TotalAlloc - before.TotalAlloc
	t.Logf("refusing a %d MiB body at a %d MiB limit allocated %.1f MiB", 32, limit>>20, float64(allocated)/(1<<20))
	if bound := uint64(limit + 2*maxBodyChunk); allocated > bound {
		t.Fatalf("refusing allocated %d bytes, over the limit plus two chunks (%d)", allocated, bound)
	}
}

type piecewise struct {
	b    []byte
	step int
}

func (p *piecewise) Read(b []byte) (int, error) {
	if len(p.b) == 0 {
		return 0, io.EOF
	}
	n := copy(b[:min(len(b), p.step)], p.b)
	p.b = p.b[n:]
	return n, nil
}

type repeat struct{ n int }

func (r *repeat) Read(b []byte) (int, error) {
	if r.n == 0 {
		return 0, io.EOF
	}
	n := min(len(b), r.n)
	for i := range b[:n] {
		b[i] = 'A'
	}
	r.n -= n
	return n, nil
}
