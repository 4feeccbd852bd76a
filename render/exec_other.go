//go:build !linux

package render

import (
	"context"
	"errors"

	"github.com/freshq/freshq/outcome"
)

// Exec is the exec renderer. It needs Linux (process groups, waitid, the parent-death signal);
// elsewhere NewExec fails.
type Exec struct{}

// NewExec fails: the exec renderer is Linux-only.
func NewExec(Options) (*Exec, error) {
	return nil, errors.New("render: the exec renderer needs linux")
}

// Render fails: there is no exec renderer on this platform.
func (*Exec) Render(_ context.Context, req Request) Result {
	return Result{Outcome: outcome.Failed, Stage: StageExec, FinalURL: req.URL, Err: "exec renderer needs linux"}
}
