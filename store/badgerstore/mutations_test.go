//go:build testclock

package badgerstore_test

import (
	"testing"

	"github.com/freshq/freshq/store/storetest"
)

// The suite's tests of protocol mutations (store.Mutations, compiled in only with the tag
// testclock): the F1 checker must find the rows they strand, on the plain store and on one
// that keeps the class index. make race runs them with the tag.
func TestMutations(t *testing.T) { storetest.RunMutations(t, openBadger) }

func TestMutationsClassIndex(t *testing.T) { storetest.RunMutations(t, openBadgerClassified) }
