//go:build testclock

package clock

import (
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"
)

// TestClock reports whether this build honours the offset file named by EnvFile. It is true:
// this build is for the end-to-end tests only.
const TestClock = true

var offset *int64 // nil: no offset file

func init() { offset = mapOffsetFile(os.Getenv(EnvFile)) }

// mapOffsetFile maps the first 8 bytes of the file at path, or returns nil when path is empty or
// the file cannot be mapped: the clock is then the plain wall clock. The mapping lives as long as
// the process, so writes by the test are seen by every load.
func mapOffsetFile(path string) *int64 {
	if path == "" {
		return nil
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() < 8 {
		return nil
	}
	m, err := mmap.MapRegion(f, 8, mmap.RDWR, 0, 0)
	if err != nil {
		return nil
	}
	return (*int64)(unsafe.Pointer(&m[0]))
}

// NowMs is the current time in ms since the epoch, shifted by the test offset if there is one.
func NowMs() int64 {
	now := time.Now().UnixMilli()
	if offset != nil {
		now += atomic.LoadInt64(offset)
	}
	return now
}
