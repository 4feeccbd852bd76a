// Package logging builds the zerolog loggers of freshq's processes: JSON lines on stderr, one per
// event (or a console format for people at a terminal), with a timestamp and the process's pid.
//
// Invariants: every line of every process carries "time" and "pid", so the supervisor's and the
// workers' lines interleaved on one stderr can be told apart; the level never falls below info
// by accident (an unset or unknown log.level is info). The level is the process's, not a
// logger's (SetLevel): every copy of a logger handed to a service follows it, so a reload that
// changes log.level reaches every line of the process, in both directions.
package logging

import (
	"os"
	"time"

	"github.com/rs/zerolog"
)

// New returns a logger writing to stderr in format "json" or "console".
func New(format string) zerolog.Logger {
	var l zerolog.Logger
	if format == "console" {
		l = zerolog.New(zerolog.ConsoleWriter{Out: os.Stderr, TimeFormat: time.TimeOnly})
	} else {
		l = zerolog.New(os.Stderr)
	}
	return l.With().Timestamp().Int("pid", os.Getpid()).Logger()
}

// SetLevel applies a log.level setting to every logger of the process (zerolog's global
// level), at start and on every reload; the loggers New builds log at every level, so the global
// one alone decides. Config validation has already refused unknown levels, so an unparsable one
// falls back to info.
func SetLevel(level string) {
	lvl, err := zerolog.ParseLevel(level)
	if err != nil || level == "" {
		lvl = zerolog.InfoLevel
	}
	zerolog.SetGlobalLevel(lvl)
}
