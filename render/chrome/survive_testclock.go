//go:build testclock

package chrome

import "os"

// survive reports whether EnvSurvive asks for browsers that outlive their worker: this build
// is for the end-to-end tests only.
func survive() bool { return os.Getenv(EnvSurvive) == "1" }
