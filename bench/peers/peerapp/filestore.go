package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
)

// fileStore appends one line per write to a file per family, as a text-file BBS
// text-file BBS did: no fsync, no index; reads scan the file.
type fileStore struct {
	dir   string
	mu    sync.Mutex
	files map[string]*os.File
	lines map[string]int64
}

func openFiles(dir string) (store, error) {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	s := &fileStore{dir: dir, files: map[string]*os.File{}, lines: map[string]int64{}}
	for _, fam := range []string{"counters", "t", "bbs", "d1"} {
		p := filepath.Join(dir, fam+".log")
		f, err := os.OpenFile(p, os.O_CREATE|os.O_APPEND|os.O_RDWR, 0o644)
		if err != nil {
			return nil, err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return nil, err
		}
		s.files[fam], s.lines[fam] = f, int64(bytes.Count(b, []byte("\n")))
	}
	return s, nil
}

func (s *fileStore) Close() error {
	for _, f := range s.files {
		f.Close()
	}
	return nil
}

// appendLine writes one line and returns the file's line count after it.
func (s *fileStore) appendLine(fam string, line []byte) (int64, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := s.files[fam].Write(append(line, '\n')); err != nil {
		return 0, fmt.Errorf("append to %s: %w", s.files[fam].Name(), err)
	}
	s.lines[fam]++
	return s.lines[fam], nil
}

func (s *fileStore) Setup(scenario string) error {
	fam, err := family(scenario)
	if err != nil {
		return err
	}
	s.mu.Lock()
	missing := seededRows(scenario) - s.lines[fam]
	s.mu.Unlock()
	for i := int64(0); i < missing; i++ {
		var line []byte
		if fam == "bbs" {
			line, _ = json.Marshal(post{Category: "general", Text: fmt.Sprintf("seeded post %d", i+1)})
		} else {
			line, _ = json.Marshal(d1row{Timestamp: now(), Region: "seed"})
		}
		if _, err := s.appendLine(fam, line); err != nil {
			return err
		}
	}
	return nil
}

func (s *fileStore) Count(scenario string) (int64, error) {
	fam, err := family(scenario)
	if err != nil {
		return 0, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.lines[fam], nil
}

// CountUp appends a line per increment: the counter is the line count.
func (s *fileStore) CountUp() (int64, error) { return s.appendLine("counters", []byte("+1")) }

func (s *fileStore) PutObject(doc string) error {
	_, err := s.appendLine("t", []byte(doc))
	return err
}

func (s *fileStore) BBSWrite(category, text string) error {
	line, _ := json.Marshal(post{Category: category, Text: text})
	_, err := s.appendLine("bbs", line)
	return err
}

// BBSRead reads the whole file, as the text-file BBS did even for the last 100.
func (s *fileStore) BBSRead(limit int) ([]post, error) {
	f, err := os.Open(filepath.Join(s.dir, "bbs.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var out []post
	sc := bufio.NewScanner(f)
	for id := int64(1); sc.Scan(); id++ {
		var p post
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			continue // a line cut short by a concurrent append
		}
		p.ID = id
		out = append(out, p)
	}
	if limit > 0 && len(out) > limit {
		out = out[len(out)-limit:]
		for i, j := 0, len(out)-1; i < j; i, j = i+1, j-1 {
			out[i], out[j] = out[j], out[i]
		}
	}
	return out, sc.Err()
}

func (s *fileStore) D1Read() ([]d1row, error) {
	f, err := os.Open(filepath.Join(s.dir, "d1.log"))
	if err != nil {
		return nil, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return []d1row{}, sc.Err()
	}
	var r d1row
	err = json.Unmarshal(sc.Bytes(), &r)
	r.ID = 1
	return []d1row{r}, err
}

func (s *fileStore) D1Write(region string) (d1row, error) {
	r := d1row{Timestamp: now(), Region: region}
	line, _ := json.Marshal(r)
	n, err := s.appendLine("d1", line)
	r.ID = n
	return r, err
}
