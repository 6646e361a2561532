//go:build !race

package dbhost

const raceEnabled = false
