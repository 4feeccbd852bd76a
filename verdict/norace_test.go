//go:build !race

package verdict

const race = false
