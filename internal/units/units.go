// Package units parses the human durations ("7d", "90s", "1h30m") and sizes
// ("8MiB", "512KB") that every sluice flag and YAML key accepts, so that one
// spelling works everywhere.
package units

import (
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"
	"unicode"

	"gopkg.in/yaml.v3"
)

// ParseDuration accepts Go durations ("1h30m", "90s", "250ms") plus days and
// weeks ("7d", "2w", "1d12h"); a bare "0" is zero.
func ParseDuration(s string) (time.Duration, error) {
	in := strings.TrimSpace(s)
	if in == "" {
		return 0, errors.New("empty duration")
	}
	neg := strings.HasPrefix(in, "-")
	rest := strings.TrimPrefix(strings.TrimPrefix(in, "-"), "+")
	var total time.Duration
	// Peel off leading day and week terms; Go's parser handles the rest.
	for {
		i := 0
		for i < len(rest) && (rest[i] >= '0' && rest[i] <= '9' || rest[i] == '.') {
			i++
		}
		if i == 0 || i >= len(rest) || (rest[i] != 'd' && rest[i] != 'w') {
			break
		}
		n, err := strconv.ParseFloat(rest[:i], 64)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (use e.g. 90s, 1h30m, 7d)", s)
		}
		unit := 24 * time.Hour
		if rest[i] == 'w' {
			unit *= 7
		}
		if n*float64(unit) > math.MaxInt64/2 {
			return 0, fmt.Errorf("%q is too long a duration", s)
		}
		total += time.Duration(n * float64(unit))
		rest = rest[i+1:]
	}
	if rest != "" {
		d, err := time.ParseDuration(rest)
		if err != nil {
			return 0, fmt.Errorf("%q is not a duration (use e.g. 90s, 1h30m, 7d)", s)
		}
		total += d
	}
	if neg {
		total = -total
	}
	return total, nil
}

// FormatDuration prints d in the shortest form ParseDuration reads back,
// using days for whole days ("7d", "36h", "1m30s").
func FormatDuration(d time.Duration) string {
	if d != 0 && d%(24*time.Hour) == 0 {
		return strconv.FormatInt(int64(d/(24*time.Hour)), 10) + "d"
	}
	s := d.String()
	// "1h0m0s" → "1h", "5m0s" → "5m".
	if strings.HasSuffix(s, "m0s") {
		s = strings.TrimSuffix(s, "0s")
	}
	if strings.HasSuffix(s, "h0m") {
		s = strings.TrimSuffix(s, "0m")
	}
	return s
}

var sizeUnits = map[string]float64{
	"": 1, "b": 1,
	"k": 1 << 10, "kb": 1e3, "kib": 1 << 10,
	"m": 1 << 20, "mb": 1e6, "mib": 1 << 20,
	"g": 1 << 30, "gb": 1e9, "gib": 1 << 30,
	"t": 1 << 40, "tb": 1e12, "tib": 1 << 40,
}

// ParseSize accepts a byte count with an optional unit: decimal KB/MB/GB/TB,
// binary KiB/MiB/GiB/TiB, and K/M/G/T as the binary ones ("8MiB", "512KB",
// "1.5G", "4096").
func ParseSize(s string) (int64, error) {
	in := strings.TrimSpace(s)
	i := strings.IndexFunc(in, func(r rune) bool { return unicode.IsLetter(r) })
	num, unit := in, ""
	if i >= 0 {
		num, unit = strings.TrimSpace(in[:i]), strings.ToLower(in[i:])
	}
	mult, ok := sizeUnits[unit]
	n, err := strconv.ParseFloat(num, 64)
	if !ok || err != nil || n < 0 || math.IsNaN(n) {
		return 0, fmt.Errorf("%q is not a size (use e.g. 4096, 512KB, 8MiB, 1GB)", s)
	}
	v := n * mult
	if v > math.MaxInt64/2 {
		return 0, fmt.Errorf("%q is too large a size", s)
	}
	return int64(v), nil
}

// FormatSize prints n with the largest binary unit that divides it exactly.
func FormatSize(n int64) string {
	for _, u := range []struct {
		name string
		v    int64
	}{{"TiB", 1 << 40}, {"GiB", 1 << 30}, {"MiB", 1 << 20}, {"KiB", 1 << 10}} {
		if n != 0 && n%u.v == 0 {
			return strconv.FormatInt(n/u.v, 10) + u.name
		}
	}
	return strconv.FormatInt(n, 10)
}

// Duration is a time.Duration read from flags and YAML in human form.
type Duration time.Duration

// String implements flag.Value.
func (d *Duration) String() string {
	if d == nil {
		return "0s"
	}
	return FormatDuration(time.Duration(*d))
}

// Set implements flag.Value.
func (d *Duration) Set(s string) error {
	v, err := ParseDuration(s)
	if err != nil {
		return err
	}
	*d = Duration(v)
	return nil
}

// UnmarshalYAML reads a duration string (or a bare number of seconds, as
// YAML authors sometimes write).
func (d *Duration) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a duration such as 90s, 1h30m or 7d", n.Line)
	}
	if secs, err := strconv.ParseInt(n.Value, 10, 64); err == nil && secs != 0 {
		return fmt.Errorf("line %d: %q has no unit: write %ds or %dms", n.Line, n.Value, secs, secs)
	}
	v, err := ParseDuration(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*d = Duration(v)
	return nil
}

// MarshalYAML writes the human form.
func (d Duration) MarshalYAML() (any, error) { return FormatDuration(time.Duration(d)), nil }

// Size is a byte count read from flags and YAML in human form.
type Size int64

// String implements flag.Value.
func (s *Size) String() string {
	if s == nil {
		return "0"
	}
	return FormatSize(int64(*s))
}

// Set implements flag.Value.
func (s *Size) Set(v string) error {
	n, err := ParseSize(v)
	if err != nil {
		return err
	}
	*s = Size(n)
	return nil
}

// UnmarshalYAML reads a size (a bare integer is bytes).
func (s *Size) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.ScalarNode {
		return fmt.Errorf("line %d: want a size such as 4096, 512KB or 8MiB", n.Line)
	}
	v, err := ParseSize(n.Value)
	if err != nil {
		return fmt.Errorf("line %d: %w", n.Line, err)
	}
	*s = Size(v)
	return nil
}

// MarshalYAML writes the human form.
func (s Size) MarshalYAML() (any, error) { return FormatSize(int64(s)), nil }
