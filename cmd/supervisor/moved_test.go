package main

import "github.com/freshq/freshq/supervise/rundir"

// statID is the segment file's identity, for the end-to-end tests that check a segment is
// still the one a supervisor created (the code lives in package supervise/rundir).
var statID = rundir.StatID
