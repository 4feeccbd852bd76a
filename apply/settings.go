package apply

import (
	"github.com/freshq/freshq/intake"
	"github.com/freshq/freshq/verdict"
)

// verdictSettings is s.Verdict, or DefaultVerdict when it is unset.
func verdictSettings(s *intake.Settings) *verdict.Settings {
	if s.Verdict == (verdict.Settings{}) {
		return &intake.DefaultVerdict
	}
	return &s.Verdict
}

// keepBytes is s.KeepBytes, or DefaultKeepBytes when it is unset.
func keepBytes(s *intake.Settings) int64 {
	if s.KeepBytes <= 0 {
		return intake.DefaultKeepBytes
	}
	return s.KeepBytes
}
