package fuzz

import (
	"testing"

	"github.com/freshq/freshq/claim"
)

func newClaimer(tb testing.TB, o claim.Options) *claim.Claimer {
	tb.Helper()
	c, err := claim.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}
