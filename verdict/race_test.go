//go:build race

package verdict

// race is set under the race detector, which makes every token many times slower: the large
// pages are read at a smaller size there (the plain run reads them at full size).
const race = true
