//go:build !amd64

package shm

import (
	"encoding/binary"
	"sync/atomic"
	"unsafe"
)

// On weakly ordered architectures (arm64 among them) plain stores may become visible before the
// writer's "writing" mark and plain loads may be satisfied after the reader's re-validation, so
// every entry word is moved with an atomic load or store. See entrycopy_amd64.go for the fast path.

func writeEntry(p unsafe.Pointer, e *Entry) {
	h := packHeader(e)
	for i, w := range h {
		atomic.StoreUint64((*uint64)(unsafe.Add(p, 8*i)), w)
	}
	var word [8]byte
	for off := 0; off < len(e.Key); off += 8 {
		clear(word[:])
		copy(word[:], e.Key[off:])
		atomic.StoreUint64((*uint64)(unsafe.Add(p, entryHeaderSize+off)), binary.LittleEndian.Uint64(word[:]))
	}
}

func readEntry(p unsafe.Pointer, e *Entry, keyCap uint32) {
	var h entryHeader
	for i := range h {
		h[i] = atomic.LoadUint64((*uint64)(unsafe.Add(p, 8*i)))
	}
	n := unpackHeader(&h, e, keyCap)
	if cap(e.Key) < n {
		e.Key = make([]byte, n, int(keyCap))
	}
	e.Key = e.Key[:n]
	var word [8]byte
	for off := 0; off < n; off += 8 {
		binary.LittleEndian.PutUint64(word[:], atomic.LoadUint64((*uint64)(unsafe.Add(p, entryHeaderSize+off))))
		copy(e.Key[off:], word[:])
	}
}
