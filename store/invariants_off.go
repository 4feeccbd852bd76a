//go:build !(invariants || race)

package store

const invariants = false
