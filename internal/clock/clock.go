// Package clock is the wall clock every freshq process reads, in ms since the Unix epoch.
//
// Tests that run real processes (the supervisor and its workers) must make time pass without
// sleeping, for example to let a killed worker's leases lapse. For them, FRESHQ_CLOCK_FILE may
// name a file of 8 bytes holding a little-endian int64 offset in ms; every process maps it and
// adds the offset to the wall clock, so the test moves time for all of them at once by writing
// the file. Unset, the clock is the plain wall clock and no file is touched.
package clock

import (
	"os"
	"sync/atomic"
	"time"
	"unsafe"

	"github.com/edsrzf/mmap-go"
)

// EnvFile names the offset file.
const EnvFile = "FRESHQ_CLOCK_FILE"

var offset *int64 // nil: no offset file

func init() {
	path := os.Getenv(EnvFile)
	if path == "" {
		return
	}
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return
	}
	defer f.Close()
	if st, err := f.Stat(); err != nil || st.Size() < 8 {
		return
	}
	m, err := mmap.MapRegion(f, 8, mmap.RDWR, 0, 0)
	if err != nil {
		return
	}
	offset = (*int64)(unsafe.Pointer(&m[0]))
}

// NowMs is the current time in ms since the epoch, shifted by the test offset if there is one.
func NowMs() int64 {
	now := time.Now().UnixMilli()
	if offset != nil {
		now += atomic.LoadInt64(offset)
	}
	return now
}

// Now is NowMs as a time.Time.
func Now() time.Time { return time.UnixMilli(NowMs()) }
