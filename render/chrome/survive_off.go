//go:build !testclock

package chrome

// survive is false outside the end-to-end tests' builds (EnvSurvive).
func survive() bool { return false }
