package units

import (
	"testing"
	"time"
)

func TestParseDuration(t *testing.T) {
	for in, want := range map[string]time.Duration{
		"7d": 7 * 24 * time.Hour, "90s": 90 * time.Second, "1h30m": 90 * time.Minute,
		"1d12h": 36 * time.Hour, "2w": 14 * 24 * time.Hour, "0": 0, "250ms": 250 * time.Millisecond,
		"-1s": -time.Second, "1.5d": 36 * time.Hour,
	} {
		got, err := ParseDuration(in)
		if err != nil || got != want {
			t.Errorf("ParseDuration(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "7", "d", "7x", "1d2", "abc", "1e400d"} {
		if _, err := ParseDuration(bad); err == nil {
			t.Errorf("ParseDuration(%q) accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{
		"8MiB": 8 << 20, "512KB": 512000, "4096": 4096, "1.5G": 3 << 29, "1gb": 1e9, "10 MB": 10e6, "0": 0,
	} {
		got, err := ParseSize(in)
		if err != nil || got != want {
			t.Errorf("ParseSize(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "MB", "-1", "8XB", "1e30GB"} {
		if _, err := ParseSize(bad); err == nil {
			t.Errorf("ParseSize(%q) accepted", bad)
		}
	}
}

func TestFormatRoundTrips(t *testing.T) {
	for _, d := range []time.Duration{7 * 24 * time.Hour, time.Hour, 90 * time.Second, 5 * time.Minute, 250 * time.Millisecond} {
		back, err := ParseDuration(FormatDuration(d))
		if err != nil || back != d {
			t.Errorf("%v → %q → %v", d, FormatDuration(d), back)
		}
	}
	if FormatSize(8<<20) != "8MiB" || FormatSize(1000) != "1000" {
		t.Errorf("FormatSize: %s %s", FormatSize(8<<20), FormatSize(1000))
	}
}
