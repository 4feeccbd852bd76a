//go:build !testclock

package main

import "github.com/freshq/freshq/store"

// pgTestSignals are none: this is a production build, which reads no test switch from its
// environment (testswitch_testclock.go has them).
func pgTestSignals() store.TestSignals { return store.TestSignals{} }
