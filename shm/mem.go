package shm

import "unsafe"

// unsafeBytes views words as bytes: the way to get 8-byte aligned memory for Format and
// FromBytes from the Go heap.
func unsafeBytes(words []uint64) []byte {
	if len(words) == 0 {
		return nil
	}
	return unsafe.Slice((*byte)(unsafe.Pointer(&words[0])), 8*len(words))
}

// AlignedMemory returns n zeroed bytes, 8-byte aligned, for Format.
func AlignedMemory(n int) []byte {
	return unsafeBytes(make([]uint64, (n+7)/8))[:n]
}
