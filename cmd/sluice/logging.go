package main

import (
	"fmt"
	"io"
	"log/slog"
	"os"
	"strings"
)

// newLogger is the logger of a command without a config file.
func newLogger(verbose bool) *slog.Logger {
	l, _ := configLogger(loggingConfig{}, verbose)
	return l
}

// configLogger honours the config's logging: block (level, type, stderr) and
// $LOG_LEVEL as Litestream does; -log-format and -v win over both.
func configLogger(c loggingConfig, verbose bool) (*slog.Logger, error) {
	levelName := c.Level
	if v := os.Getenv("LOG_LEVEL"); v != "" {
		levelName = v
	}
	var level slog.Level
	switch strings.ToLower(levelName) {
	case "", "info":
		level = slog.LevelInfo
	case "debug", "trace":
		level = slog.LevelDebug
	case "warn", "warning":
		level = slog.LevelWarn
	case "error":
		level = slog.LevelError
	default:
		return nil, fmt.Errorf("logging level %q: want debug, info, warn or error", levelName)
	}
	if verbose {
		level = slog.LevelDebug
	}
	format := logFormat
	if format == "" {
		format = strings.ToLower(c.Type)
	}
	var w io.Writer = os.Stderr
	if c.Stderr != nil && !*c.Stderr {
		w = os.Stdout
	}
	opts := &slog.HandlerOptions{Level: level}
	switch format {
	case "", "text":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	default:
		return nil, fmt.Errorf("logging type %q: want text or json", c.Type)
	}
}
