// Package k6 holds k6 scripts (*.js) for the same scenarios as `sluice-bench`,
// for people who already use k6. The Go package only carries their test, which
// parses every script with `node --check` (k6 itself is not needed in CI).
package k6
