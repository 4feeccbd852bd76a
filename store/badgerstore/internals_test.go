package badgerstore

import (
	"github.com/freshq/freshq/store/badgerstore/internal/keyspace"

	"github.com/freshq/freshq/store/badgerstore/internal/funnel"
)

// The key builders of package keyspace under the names the tests of this package use.
const (
	prefixSchedule = keyspace.PrefixSchedule
	prefixDue      = keyspace.PrefixDue
	prefixClass    = keyspace.PrefixClass
	keyClassPrint  = keyspace.ClassPrint
)

var (
	scheduleKey = keyspace.Schedule
	targetKey   = keyspace.Target
	pageKey     = keyspace.Page
	dueKey      = keyspace.Due
	classKey    = keyspace.Class
)

// rowValues is the funnel's encoding of a row and its projection, for benchmarks that load
// a corpus behind the funnel.
var rowValues = funnel.RowValues
