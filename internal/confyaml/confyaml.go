// Package confyaml decodes sluice's YAML config files the same way for every
// command: $VAR and ${VAR} expanded from the environment (as Litestream
// does), keys in kebab-case with snake_case accepted as an alias, and an
// unknown key refused with the nearest known one.
package confyaml

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/sluicedb/sluice/internal/suggest"
)

// Options tune Decode.
type Options struct {
	// NoExpandEnv leaves $VAR untouched (a password containing "$").
	NoExpandEnv bool
	// UnsetIsError refuses a $VAR that is not set instead of expanding it to
	// nothing: a config whose replica or token comes from a missing variable
	// would otherwise run with an empty value or fall back to a default.
	UnsetIsError bool
	// Aliases renames top-level keys (old spelling → current) before decoding.
	Aliases map[string]string
}

// ExpandEnv replaces $VAR and ${VAR} with the environment's values (unset:
// empty) and $PID with the process id, as Litestream does.
func ExpandEnv(s string) string {
	out, _ := expand(s)
	return out
}

// expand is ExpandEnv that also returns the variables it found unset.
func expand(s string) (string, []string) {
	var unset []string
	out := os.Expand(s, func(key string) string {
		if key == "PID" {
			return strconv.Itoa(os.Getpid())
		}
		v, ok := os.LookupEnv(key)
		if !ok && envName.MatchString(key) && !slices.Contains(unset, key) {
			unset = append(unset, key)
		}
		return v
	})
	return out, unset
}

// envName is what a variable's name looks like ($1 or $# in a value is text).
var envName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

// unsetIn lists the unset variables the document's keys and values name; a
// "$" in a comment is not a reference. A document that does not parse
// before expansion is left to the decoder.
func unsetIn(raw []byte) []string {
	var doc yaml.Node
	if yaml.Unmarshal(raw, &doc) != nil {
		return nil
	}
	var unset []string
	var walk func(n *yaml.Node)
	walk = func(n *yaml.Node) {
		if n.Kind == yaml.ScalarNode {
			_, u := expand(n.Value)
			for _, v := range u {
				if !slices.Contains(unset, v) {
					unset = append(unset, v)
				}
			}
		}
		for _, c := range n.Content {
			walk(c)
		}
	}
	walk(&doc)
	return unset
}

// Decode parses raw into out (a pointer to a struct with kebab-case yaml
// tags). An empty document leaves out unchanged.
func Decode(raw []byte, out any, opts Options) error {
	if !opts.NoExpandEnv {
		if opts.UnsetIsError {
			if unset := unsetIn(raw); len(unset) > 0 {
				verb, it := "is", "it"
				if len(unset) > 1 {
					verb, it = "are", "them"
				}
				return fmt.Errorf("$%s %s not set (set %s, or give -no-expand-env to read $ literally)", strings.Join(unset, ", $"), verb, it)
			}
		}
		raw = []byte(ExpandEnv(string(raw)))
	}
	var doc yaml.Node
	if err := yaml.NewDecoder(bytes.NewReader(raw)).Decode(&doc); err != nil {
		if err.Error() == "EOF" {
			return nil
		}
		return err
	}
	normalizeKeys(&doc)
	renameTopLevel(&doc, opts.Aliases)
	if err := checkKeys(&doc, reflect.TypeOf(out), ""); err != nil {
		return err
	}
	return doc.Decode(out)
}

// normalizeKeys rewrites snake_case mapping keys to kebab-case.
func normalizeKeys(n *yaml.Node) {
	if n.Kind == yaml.MappingNode {
		for i := 0; i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			if k.Kind == yaml.ScalarNode && strings.Contains(k.Value, "_") {
				k.Value = strings.ReplaceAll(k.Value, "_", "-")
			}
		}
	}
	for _, c := range n.Content {
		normalizeKeys(c)
	}
}

// renameTopLevel applies aliases to the document's top-level keys; a key
// given in both spellings is left for the decoder to report as a duplicate.
func renameTopLevel(doc *yaml.Node, aliases map[string]string) {
	if len(aliases) == 0 || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
		return
	}
	m := doc.Content[0]
	for i := 0; i+1 < len(m.Content); i += 2 {
		if to, ok := aliases[m.Content[i].Value]; ok {
			m.Content[i].Value = to
		}
	}
}

var nodeType = reflect.TypeOf(yaml.Node{})

var unmarshalerType = reflect.TypeOf((*yaml.Unmarshaler)(nil)).Elem()

// checkKeys refuses a mapping key that t has no field for.
func checkKeys(n *yaml.Node, t reflect.Type, where string) error {
	for t.Kind() == reflect.Pointer {
		if t.Implements(unmarshalerType) {
			return nil
		}
		t = t.Elem()
	}
	if t == nodeType || reflect.PointerTo(t).Implements(unmarshalerType) {
		return nil
	}
	switch n.Kind {
	case yaml.DocumentNode:
		for _, c := range n.Content {
			if err := checkKeys(c, t, where); err != nil {
				return err
			}
		}
		return nil
	case yaml.SequenceNode:
		if t.Kind() != reflect.Slice && t.Kind() != reflect.Array {
			return nil // a type mismatch: the decoder reports it
		}
		for i, c := range n.Content {
			if err := checkKeys(c, t.Elem(), fmt.Sprintf("%s[%d]", where, i)); err != nil {
				return err
			}
		}
		return nil
	case yaml.MappingNode:
		if t.Kind() != reflect.Struct {
			return nil
		}
		fields := map[string]reflect.Type{}
		collectFields(t, fields)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, v := n.Content[i], n.Content[i+1]
			if k.Value == "<<" { // YAML merge key
				continue
			}
			ft, ok := fields[k.Value]
			path := strings.TrimPrefix(where+"."+k.Value, ".")
			if !ok {
				names := make([]string, 0, len(fields))
				for name := range fields {
					names = append(names, name)
				}
				msg := fmt.Sprintf("line %d: unknown key %q", k.Line, path)
				if parent, inner, ok := nestedHome(k.Value, fields); ok {
					// A flag's name given at the top level: say where it lives.
					msg += fmt.Sprintf(" (it goes under %q: %s: {%s: …})", parent, parent, inner)
				} else if s := suggest.Closest(k.Value, names); s != "" {
					msg += fmt.Sprintf(" (did you mean %q?)", s)
				}
				return errors.New(msg)
			}
			if err := checkKeys(v, ft, path); err != nil {
				return err
			}
		}
	}
	return nil
}

// nestedHome finds the struct field one level down that has key among its
// own keys (or the key without that field's name as a prefix), and returns
// the field's name and the key inside it.
func nestedHome(key string, fields map[string]reflect.Type) (parent, inner string, ok bool) {
	names := make([]string, 0, len(fields))
	for name := range fields {
		names = append(names, name)
	}
	slices.Sort(names) // the same answer every time
	for _, name := range names {
		t := fields[name]
		for t.Kind() == reflect.Pointer {
			t = t.Elem()
		}
		if t.Kind() != reflect.Struct || t == nodeType {
			continue
		}
		keys := map[string]reflect.Type{}
		collectFields(t, keys)
		if _, ok := keys[key]; ok {
			return name, key, true
		}
		if rest, ok := strings.CutPrefix(key, name+"-"); ok { // lease-ttl: lease: {ttl: …}
			if _, ok := keys[rest]; ok {
				return name, rest, true
			}
		}
	}
	return "", "", false
}

// collectFields maps every yaml key of struct t (inline structs included) to its type.
func collectFields(t reflect.Type, out map[string]reflect.Type) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		tag := f.Tag.Get("yaml")
		name, opts, _ := strings.Cut(tag, ",")
		if name == "-" || (!f.IsExported() && !f.Anonymous) {
			continue
		}
		if strings.Contains(opts, "inline") {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			collectFields(ft, out)
			continue
		}
		if name == "" {
			name = strings.ToLower(f.Name)
		}
		out[name] = f.Type
	}
}
