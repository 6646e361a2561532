package sqlshell

import (
	"encoding/base64"
	"encoding/csv"
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Modes lists the output modes.
var Modes = []string{"table", "csv", "json", "line"}

func validMode(m string) bool {
	for _, x := range Modes {
		if x == m {
			return true
		}
	}
	return false
}

// writeResult prints res in mode; a result without columns prints nothing.
func writeResult(w io.Writer, mode string, res Result) error {
	if len(res.Columns) == 0 {
		return nil
	}
	switch mode {
	case "csv":
		cw := csv.NewWriter(w)
		cw.Write(res.Columns)
		for _, r := range res.Rows {
			rec := make([]string, len(r))
			for i, v := range r {
				rec[i] = v.plain()
			}
			cw.Write(rec)
		}
		cw.Flush()
		return cw.Error()
	case "json":
		return writeJSON(w, res)
	case "line":
		width := 0
		for _, c := range res.Columns {
			width = max(width, utf8.RuneCountInString(c))
		}
		for i, r := range res.Rows {
			if i > 0 {
				fmt.Fprintln(w)
			}
			for j, v := range r {
				fmt.Fprintf(w, "%*s = %s\n", width, res.Columns[j], v.display())
			}
		}
		return nil
	}
	return writeTable(w, res)
}

func writeTable(w io.Writer, res Result) error {
	if len(res.Rows) == 0 {
		return nil
	}
	widths := make([]int, len(res.Columns))
	cells := make([][]string, len(res.Rows))
	for i, c := range res.Columns {
		widths[i] = utf8.RuneCountInString(c)
	}
	for i, r := range res.Rows {
		cells[i] = make([]string, len(r))
		for j, v := range r {
			s := strings.NewReplacer("\n", `\n`, "\r", `\r`, "\t", `\t`).Replace(v.display())
			cells[i][j] = s
			if j < len(widths) {
				widths[j] = max(widths[j], utf8.RuneCountInString(s))
			}
		}
	}
	var sb strings.Builder
	rule := func() {
		sb.WriteByte('+')
		for _, n := range widths {
			sb.WriteString(strings.Repeat("-", n+2) + "+")
		}
		sb.WriteByte('\n')
	}
	line := func(vals []string) {
		sb.WriteByte('|')
		for j, n := range widths {
			s := ""
			if j < len(vals) {
				s = vals[j]
			}
			sb.WriteString(" " + s + strings.Repeat(" ", n-utf8.RuneCountInString(s)) + " |")
		}
		sb.WriteByte('\n')
	}
	rule()
	line(res.Columns)
	rule()
	for _, r := range cells {
		line(r)
	}
	rule()
	_, err := io.WriteString(w, sb.String())
	return err
}

// writeJSON prints rows as an array of objects, keys in column order.
func writeJSON(w io.Writer, res Result) error {
	var sb strings.Builder
	sb.WriteString("[")
	for i, r := range res.Rows {
		if i > 0 {
			sb.WriteString(",\n")
		}
		sb.WriteString("{")
		for j, v := range r {
			if j > 0 {
				sb.WriteString(",")
			}
			k, _ := json.Marshal(res.Columns[j])
			sb.Write(k)
			sb.WriteString(":")
			sb.WriteString(jsonValue(v))
		}
		sb.WriteString("}")
	}
	sb.WriteString("]\n")
	_, err := io.WriteString(w, sb.String())
	return err
}

func jsonValue(v Value) string {
	switch v.Kind {
	case Integer:
		return strconv.FormatInt(v.Int, 10)
	case Float:
		if s := v.literal(); s != "NULL" && !strings.Contains(s, "e999") {
			return s
		}
		return "null"
	case Text:
		b, _ := json.Marshal(v.Text)
		return string(b)
	case Blob:
		return `{"base64":"` + base64.StdEncoding.EncodeToString(v.Blob) + `"}`
	}
	return "null"
}
