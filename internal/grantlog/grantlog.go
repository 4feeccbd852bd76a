// Package grantlog is a test switch: in a binary built for the end-to-end tests (the build tag
// testclock, testkit/testbin), when FRESHQ_TEST_GRANT_LOG names a file, every process of a
// node appends to it one line per grant and per shard acquire, release and loss, so that an
// end-to-end test can check from what the nodes did, not from the lease table, that no shard
// was granted by two nodes at once. Unset it does nothing and costs nothing; in any other
// build (a shipped binary) Open reads no environment and always returns nil
// (open_off.go), which internal/testhold's TestProductionBinariesLinkNoTestHook checks.
//
// Lines, each written with one write(2) to a file opened O_APPEND, so lines of several
// processes never interleave:
//
//	<unix ns> grant <node> <shard> <cache key>
//	<unix ns> acquire|release|lost <node> <shard> <epoch>
//
// A grant's time is taken before the fence check that let it through; an acquire is written
// once it committed, before any row of the shard can be granted; a release before it commits.
package grantlog

import (
	"fmt"
	"os"
	"strconv"
	"time"

	"github.com/cespare/xxhash/v2"
)

// Env is the environment variable that names the log file in a test build.
const Env = "FRESHQ_TEST_GRANT_LOG"

// Log appends to the grant log. A nil *Log does nothing.
type Log struct {
	f      *os.File
	node   string
	shards uint64
}

// Grant records a grant of key at atNs. Its shard is xxhash64(key) mod shards, as the store's.
func (l *Log) Grant(key []byte, atNs int64) {
	if l == nil {
		return
	}
	b := strconv.AppendInt(nil, atNs, 10)
	b = append(b, " grant "...)
	b = append(b, l.node...)
	b = append(b, ' ')
	b = strconv.AppendUint(b, xxhash.Sum64(key)%l.shards, 10)
	b = append(b, ' ')
	b = append(b, key...)
	b = append(b, '\n')
	_, _ = l.f.Write(b)
}

// Event records a shard's acquire, release or loss at epoch, now.
func (l *Log) Event(kind string, shard int32, epoch int64) {
	if l == nil {
		return
	}
	_, _ = fmt.Fprintf(l.f, "%d %s %s %d %d\n", time.Now().UnixNano(), kind, l.node, shard, epoch)
}
