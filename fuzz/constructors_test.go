package fuzz

import (
	"testing"

	"github.com/freshq/freshq/claim"
	"github.com/freshq/freshq/sweep"
)

func newClaimer(tb testing.TB, o claim.Options) *claim.Claimer {
	tb.Helper()
	c, err := claim.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return c
}

func newSweeper(tb testing.TB, o sweep.Options) *sweep.Sweeper {
	tb.Helper()
	s, err := sweep.New(o)
	if err != nil {
		tb.Fatal(err)
	}
	return s
}
