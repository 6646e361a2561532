//go:build race

package dbhost

const raceEnabled = true
